import Foundation
import Glibc
import Synchronization

/// A process started by a test, with its output captured; stopped by PID when the test ends.
final class ChildProcess {
    let process = Process()
    private let stdoutBuffer = OutputBuffer()
    private let stderrBuffer = OutputBuffer()

    /// Captured output, appended from a background reader.
    final class OutputBuffer: Sendable {
        private let data = Mutex(Data())
        func append(_ chunk: Data) { data.withLock { $0.append(chunk) } }
        var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
    }

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let stdoutBuffer = self.stdoutBuffer
        let stderrBuffer = self.stderrBuffer
        out.fileHandleForReading.readabilityHandler = { handle in stdoutBuffer.append(handle.availableData) }
        err.fileHandleForReading.readabilityHandler = { handle in stderrBuffer.append(handle.availableData) }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var stdout: String { stdoutBuffer.text }
    var stderr: String { stderrBuffer.text }
    var isRunning: Bool { process.isRunning }

    /// Waits (bounded) until `predicate` holds for the captured stdout or stderr.
    @discardableResult
    func waitForOutput(timeout: TimeInterval = 10, stream: KeyPath<ChildProcess, String> = \.stderr, _ predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = self[keyPath: stream]
            if predicate(text) { return text }
            if !process.isRunning {
                throw TestFailure("process exited (status \(process.terminationStatus)) before the expected output; stderr:\n\(stderr)")
            }
            usleep(10_000)
        }
        throw TestFailure("timed out waiting for output; stdout:\n\(stdout)\nstderr:\n\(stderr)")
    }

    func signal(_ number: Int32) {
        if process.isRunning { Glibc.kill(pid, number) }
    }

    /// Sends SIGTERM, waits up to `grace` seconds, then SIGKILL. Returns the exit status.
    @discardableResult
    func stop(grace: TimeInterval = 10) -> Int32 {
        if process.isRunning {
            Glibc.kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(grace)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning {
                Glibc.kill(pid, SIGKILL)
                process.waitUntilExit()
                return -9
            }
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Stops the process at once.
    func kill() {
        if process.isRunning {
            Glibc.kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Resident memory from /proc, in KiB.
    func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
        }
        return 0
    }

    deinit {
        if process.isRunning {
            Glibc.kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Paths {
    /// The package root, found from this file's location.
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path
    }()

    static var larder: String {
        ProcessInfo.processInfo.environment["LARDER_BINARY"] ?? root + "/.build/debug/larder"
    }

    static let originScript = root + "/Tests/LarderIntegrationTests/Fixtures/origin.py"

    /// A fresh directory under /tmp, removed by the caller.
    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "larder-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

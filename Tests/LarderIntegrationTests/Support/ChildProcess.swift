import Foundation
import Glibc
import Synchronization

/// A process started by a test (posix_spawn), with its output captured; reaped by its own PID
/// with waitpid and stopped by PID when the test ends. (Foundation's Process was not used: its
/// SIGCHLD monitoring missed exits when several children came and went at once.)
final class ChildProcess {
    let pid: pid_t
    private let stdoutBuffer = OutputBuffer()
    private let stderrBuffer = OutputBuffer()
    private let readers = DispatchGroup()
    private var exitStatus: Int32?

    /// Captured output, appended from a background reader.
    final class OutputBuffer: Sendable {
        private let data = Mutex(Data())
        func append(_ chunk: Data) { data.withLock { $0.append(chunk) } }
        var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
    }

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw TestFailure("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        // Children start with every signal unblocked and at default disposition, whatever the
        // test runner did to its own.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let env: [UnsafeMutablePointer<CChar>?]
        if let environment {
            env = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        } else {
            env = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { for pointer in env { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, &attributes, argv, env)
        Glibc.close(outPipe[1])
        Glibc.close(errPipe[1])
        guard result == 0 else {
            Glibc.close(outPipe[0])
            Glibc.close(errPipe[0])
            throw TestFailure("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        pid = child
        drain(outPipe[0], into: stdoutBuffer)
        drain(errPipe[0], into: stderrBuffer)
    }

    private func drain(_ fd: Int32, into buffer: OutputBuffer) {
        readers.enter()
        let group = readers
        Thread.detachNewThread {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                buffer.append(Data(chunk[0..<count]))
            }
            Glibc.close(fd)
            group.leave()
        }
    }

    /// Compatibility with the Foundation.Process-shaped call sites.
    var process: ChildProcess { self }
    var processIdentifier: pid_t { pid }
    var stdout: String { stdoutBuffer.text }
    var stderr: String { stderrBuffer.text }

    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            record(status)
            return false
        }
        return result == 0
    }

    /// Blocks until the process exits (reaping it), then until its output is read.
    func waitUntilExit() {
        while exitStatus == nil {
            var status: Int32 = 0
            let result = waitpid(pid, &status, 0)
            if result == pid {
                record(status)
            } else if result < 0 && errno != EINTR {
                exitStatus = -1
            }
        }
        readers.wait()
    }

    /// The exit code, or minus the signal number that ended it.
    var terminationStatus: Int32 {
        waitUntilExit()
        return exitStatus ?? -1
    }

    private func record(_ status: Int32) {
        let signal = status & 0x7f
        exitStatus = signal == 0 ? (status >> 8) & 0xff : -signal
    }

    /// Waits (bounded) until `predicate` holds for the captured stdout or stderr.
    @discardableResult
    func waitForOutput(timeout: TimeInterval = 10, stream: KeyPath<ChildProcess, String> = \.stderr, _ predicate: (String) -> Bool) throws
        -> String
    {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = self[keyPath: stream]
            if predicate(text) { return text }
            if !isRunning {
                usleep(20_000)
                let final = self[keyPath: stream]
                if predicate(final) { return final }
                throw TestFailure("process exited (status \(exitStatus ?? -1)) before the expected output; stderr:\n\(stderr)")
            }
            usleep(10_000)
        }
        throw TestFailure("timed out waiting for output; stdout:\n\(stdout)\nstderr:\n\(stderr)")
    }

    func signal(_ number: Int32) {
        if isRunning { Glibc.kill(pid, number) }
    }

    /// Sends SIGTERM, waits up to `grace` seconds, then SIGKILL. Returns the exit status.
    @discardableResult
    func stop(grace: TimeInterval = 10) -> Int32 {
        if isRunning {
            Glibc.kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(grace)
            while isRunning && Date() < deadline { usleep(10_000) }
            if isRunning { Glibc.kill(pid, SIGKILL) }
        }
        return terminationStatus
    }

    /// Stops the process at once.
    func kill() {
        if isRunning { Glibc.kill(pid, SIGKILL) }
        waitUntilExit()
    }

    /// User and system CPU time from /proc, in clock ticks (all threads).
    func cpuTicks() -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        // After the command name: state is field 3, utime and stime fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
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
        if exitStatus == nil {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
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

    static var fuzzer: String { root + "/.build/debug/larder-fuzz" }

    static let originScript = root + "/Tests/LarderIntegrationTests/Fixtures/origin.py"
    static let floodScript = root + "/Tests/LarderIntegrationTests/Fixtures/flood.py"
    static let tunnelTargetScript = root + "/Tests/LarderIntegrationTests/Fixtures/tunnel_target.py"

    /// A fresh directory under /tmp, removed by the caller.
    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "larder-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

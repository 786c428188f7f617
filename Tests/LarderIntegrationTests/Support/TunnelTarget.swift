import Foundation

/// A server behind a CONNECT tunnel (Fixtures/tunnel_target.py) on 127.0.0.1: an HTTPS server
/// with a throwaway certificate, a raw TCP command server, or a black hole for connect timeouts.
final class TunnelTarget {
    enum Mode: String { case tls, raw, blackhole }

    let child: ChildProcess
    let port: Int
    /// For `.tls`: the directory holding `cert.pem`.
    let directory: String

    init(_ mode: Mode) throws {
        directory = Paths.temporaryDirectory()
        var arguments = [Paths.tunnelTargetScript, mode.rawValue]
        if mode == .tls { arguments.append(directory) }
        child = try ChildProcess("/usr/bin/env", ["python3"] + arguments)
        let text = try child.waitForOutput(timeout: 20, stream: \.stdout) { $0.contains("PORT ") }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }), let port = Int(line.dropFirst(5)) else {
            throw TestFailure("tunnel target did not report its port: \(text) \(child.stderr)")
        }
        self.port = port
    }

    var certificate: String { directory + "/cert.pem" }

    /// For `.raw`: how many ECHO/SEND/HOLD connections reached it.
    func connectionCount() throws -> Int {
        let connection = try RawConnection(port: port)
        connection.send("COUNT\n")
        let text = String(decoding: connection.readUntilClose(), as: UTF8.self)
        guard let count = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestFailure("COUNT answered \(text)")
        }
        return count
    }

    deinit {
        child.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

import Foundation

/// The scriptable origin server (Fixtures/origin.py) on 127.0.0.1, port chosen by the kernel;
/// over HTTPS as `localhost` when given a certificate (``TLSFiles``).
final class Origin {
    let child: ChildProcess
    let port: Int
    /// The certificate it serves and the anchors that verify it, for an HTTPS origin.
    let tls: (certificate: String, key: String, anchors: String)?

    /// Listening on ::1 rather than 127.0.0.1 (plain HTTP only).
    let ipv6: Bool

    init(tls: (certificate: String, key: String, anchors: String)? = nil, ipv6: Bool = false) throws {
        self.tls = tls
        self.ipv6 = ipv6
        child = try ChildProcess(
            "/usr/bin/env",
            ["python3", Paths.originScript] + (tls.map { ["--tls", $0.certificate, $0.key] } ?? []) + (ipv6 ? ["--ipv6"] : []))
        let text = try child.waitForOutput(stream: \.stdout) { $0.contains("PORT ") }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }),
            let port = Int(line.dropFirst(5))
        else { throw TestFailure("origin did not report its port: \(text)") }
        self.port = port
    }

    /// `http://127.0.0.1:PORT` (`http://[::1]:PORT`) + path, or `https://localhost:PORT` + path
    /// over TLS.
    func url(_ path: String) -> String {
        tls != nil ? "https://localhost:\(port)\(path)" : ipv6 ? "http://[::1]:\(port)\(path)" : "http://127.0.0.1:\(port)\(path)"
    }

    /// curl's arguments to reach it directly (its anchors, for an HTTPS origin).
    var direct: [String] { tls.map { ["--cacert", $0.anchors] } ?? [] }

    /// How many requests reached the origin for this exact path and query.
    func count(_ pathAndQuery: String) throws -> Int {
        try counts()[pathAndQuery] ?? 0
    }

    /// How many requests reached the origin for each path and query, in one ask.
    func counts() throws -> [String: Int] {
        (try control("/_count")["paths"] as? [String: Int]) ?? [:]
    }

    /// How many body bytes the origin sent for this exact path and query.
    func bytes(_ pathAndQuery: String) throws -> Int {
        let counts = try control("/_count")
        return ((counts["bytes"] as? [String: Int]) ?? [:])[pathAndQuery] ?? 0
    }

    /// A new version of `path` (other bytes, another ETag) for `ranges=1` resources.
    func bump(_ path: String) throws {
        _ = try control("/_bump?path=\(path)")
    }

    /// How many connections carried the requests it counted.
    func connections() throws -> Int {
        (try control("/_count")["connections"] as? Int) ?? 0
    }

    /// How many requests reached the origin in all.
    func total() throws -> Int {
        (try control("/_count")["total"] as? Int) ?? 0
    }

    /// Every request the origin counted: method, target, headers, arrival time (seconds).
    func requests() throws -> [(method: String, target: String, headers: [(String, String)], time: Double)] {
        let result = try Curl.run(direct + [url("/_requests")])
        let list = (try JSONSerialization.jsonObject(with: result.body) as? [[String: Any]]) ?? []
        return list.map { entry in
            let headers = (entry["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }
            return (entry["method"] as? String ?? "", entry["target"] as? String ?? "", headers, entry["time"] as? Double ?? 0)
        }
    }

    /// The body the origin sends for `pathAndQuery`, fetched directly.
    func directBody(_ pathAndQuery: String) throws -> Data {
        try Curl.run(direct + [url(pathAndQuery)]).body
    }

    private func control(_ path: String) throws -> [String: Any] {
        let result = try Curl.run(direct + [url(path)])
        return (try JSONSerialization.jsonObject(with: result.body) as? [String: Any]) ?? [:]
    }

    /// SIGKILL: the fixture holds no state worth a graceful stop (and a test runner may start
    /// children with SIGTERM blocked).
    deinit { child.kill() }
}

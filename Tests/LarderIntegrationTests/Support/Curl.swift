import Foundation

/// Runs the real curl client and collects what it saw.
enum Curl {
    struct Result {
        let exitCode: Int32
        let status: Int
        /// Header fields of the final response, names lower-cased, in order.
        let headers: [(String, String)]
        let body: Data
        let stderr: String

        func header(_ name: String) -> String? {
            headers.first { $0.0 == name.lowercased() }?.1
        }

        /// Every field line of `name` combined into one list value (RFC 9110 §5.3).
        func combined(_ name: String) -> String? {
            let values = headers.filter { $0.0 == name.lowercased() }.map(\.1)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// `curl -s -S -D headers -o body ARGS`.
    static func run(_ arguments: [String], timeout: Int = 30) throws -> Result {
        let directory = Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let headerFile = directory + "/headers"
        let bodyFile = directory + "/body"
        let child = try ChildProcess(
            "/usr/bin/curl",
            ["-s", "-S", "--max-time", "\(timeout)", "-D", headerFile, "-o", bodyFile] + arguments,
            environment: ["PATH": "/usr/bin:/bin"])
        child.process.waitUntilExit()
        let rawHeaders = (try? String(contentsOfFile: headerFile, encoding: .isoLatin1)) ?? ""
        let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))) ?? Data()
        let (status, headers) = parseHeaders(rawHeaders)
        return Result(exitCode: child.process.terminationStatus, status: status, headers: headers, body: body, stderr: child.stderr)
    }

    /// Through the proxy at `proxy`.
    static func viaProxy(_ proxy: String, _ arguments: [String], timeout: Int = 30) throws -> Result {
        try run(["--proxy", proxy] + arguments, timeout: timeout)
    }

    /// The last response block of a `-D` dump (interim 1xx blocks are skipped).
    static func parseHeaders(_ text: String) -> (Int, [(String, String)]) {
        let blocks = text.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
        guard let last = blocks.last else { return (0, []) }
        var lines = last.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        let status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return (status, headers)
    }
}

/// A parsed `Cache-Status` member (RFC 9211) from Larder: `larder; hit; ttl=59; detail=disk`.
struct CacheStatusField {
    let raw: String
    let hit: Bool
    let parameters: [String: String]

    init?(_ value: String?) {
        guard let value else { return nil }
        raw = value
        // Larder's own member is the last one (RFC 9211 §2: the cache closest to the client).
        // Split on separators outside quoted strings.
        func split(_ text: String, on separator: Character) -> [String] {
            var parts: [String] = []
            var current = ""
            var quoted = false
            for character in text {
                if character == "\"" { quoted.toggle() }
                if character == separator && !quoted {
                    parts.append(current)
                    current = ""
                } else {
                    current.append(character)
                }
            }
            parts.append(current)
            return parts
        }
        let member = split(value, on: ",").last { $0.contains("larder") } ?? value
        var parts = split(member, on: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.first == "larder" else { return nil }
        parts.removeFirst()
        hit = parts.contains("hit")
        var parameters: [String: String] = [:]
        for part in parts where part.contains("=") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            parameters[String(pieces[0])] = String(pieces[1]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        for part in parts where !part.contains("=") { parameters[part] = "" }
        self.parameters = parameters
    }

    var fwd: String? { parameters["fwd"] }
    var detail: String? { parameters["detail"] }
    var stored: Bool { parameters["stored"] != nil }
    var collapsed: Bool { parameters["collapsed"] != nil }
    var fwdStatus: Int? { parameters["fwd-status"].flatMap { Int($0) } }
    var ttl: Int? { parameters["ttl"].flatMap { Int($0) } }
    /// A hit served from memory (no detail) or disk.
    var isMemoryHit: Bool { hit && detail == nil }
    var isDiskHit: Bool { hit && detail == "disk" }
}

extension Curl.Result {
    /// The member of the cache closest to the client: behind a parent cache, the response
    /// carries the parent's member first (RFC 9211 §2).
    var cacheStatus: CacheStatusField? { CacheStatusField(combined("cache-status")) }
}

extension RawConnection.Response {
    var cacheStatus: CacheStatusField? { CacheStatusField(header("cache-status")) }
}

/// nil when two bodies are byte for byte the same, else their sizes and the first differing
/// byte. Bodies are compared with this, not with `#expect(a == b)`: on a mismatch Swift Testing
/// computes a collection difference of the operands, which runs for minutes on bodies of
/// megabytes and turns a failure into a hang.
func bodyMismatch(_ actual: Data, _ expected: Data) -> String? {
    if actual == expected { return nil }
    let same = zip(actual, expected).prefix { $0 == $1 }.count
    return "\(actual.count) bytes, expected \(expected.count); the first difference at byte \(same)"
}

import LarderHTTP
import Testing

/// Feeds raw request bytes to the parser and reports what it decided.
private enum ParseResult: Equatable {
    case head(method: String, target: String, version: String)
    case incomplete
    case rejected(Int)
}

private func parse(_ text: String, maxHeadBytes: Int = 64 * 1024) -> ParseResult {
    var parser = RequestHeadParser(maxHeadBytes: maxHeadBytes)
    let bytes = Array(text.utf8)
    do {
        let outcome = try bytes.withUnsafeBytes { try parser.parse($0) }
        switch outcome {
        case .incomplete:
            return .incomplete
        case .complete(let head, _):
            let target: String
            switch head.target {
            case .absolute(let url): target = url.description
            case .origin(let path): target = path
            case .authority(let host, let port): target = "\(host):\(port)"
            case .asterisk: target = "*"
            }
            return .head(method: head.method.rawValue, target: target, version: head.version.description)
        }
    } catch let error as HTTPParseError {
        return .rejected(error.status)
    } catch {
        return .rejected(-1)
    }
}

private struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    let raw: String
    let expected: ParseResult
    var testDescription: String { name }
}

private let host = "Host: example.org\r\n"

private let cases: [Case] = [
    // Accepted
    Case(
        name: "absolute GET", raw: "GET http://example.org/a HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/a", version: "HTTP/1.1")),
    Case(
        name: "host lower-cased, default port dropped", raw: "GET http://EXAMPLE.org:80/a?b=c HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/a?b=c", version: "HTTP/1.1")),
    Case(
        name: "explicit port kept", raw: "GET http://example.org:8080/ HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org:8080/", version: "HTTP/1.1")),
    Case(
        name: "empty path becomes /", raw: "GET http://example.org HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "IPv6 literal", raw: "GET http://[::1]:8000/x HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n",
        expected: .head(method: "GET", target: "http://[::1]:8000/x", version: "HTTP/1.1")),
    Case(
        name: "HTTP/1.0 without Host", raw: "GET http://example.org/ HTTP/1.0\r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.0")),
    Case(
        name: "origin-form parsed (rejected later by the proxy)", raw: "GET /index.html HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "/index.html", version: "HTTP/1.1")),
    Case(
        name: "CONNECT authority-form", raw: "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n",
        expected: .head(method: "CONNECT", target: "example.org:443", version: "HTTP/1.1")),
    Case(
        name: "OPTIONS asterisk", raw: "OPTIONS * HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "OPTIONS", target: "*", version: "HTTP/1.1")),
    Case(
        name: "leading empty line ignored", raw: "\r\nGET http://example.org/ HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "HTTP/1.2 answered as 1.1", raw: "GET http://example.org/ HTTP/1.2\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "extension method", raw: "PURGE http://example.org/ HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "PURGE", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "percent-encoding", raw: "GET http://example.org/a%20b HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/a%20b", version: "HTTP/1.1")),
    Case(
        name: "obs-text in a value", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)X: caf\u{e9}\r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "scheme and host in capitals, HEAD", raw: "HEAD HTTP://Example.ORG:8080/A HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "HEAD", target: "http://example.org:8080/A", version: "HTTP/1.1")),
    Case(
        name: "https default port dropped", raw: "GET https://example.org:443/ HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "https://example.org/", version: "HTTP/1.1")),
    Case(
        name: "query without a path", raw: "GET http://example.org?a=1 HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GET", target: "http://example.org/?a=1", version: "HTTP/1.1")),
    Case(
        name: "Host with a port, lower-case name", raw: "GET http://example.org/ HTTP/1.1\r\nhost: example.org:8080\r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "empty Host value", raw: "GET http://example.org/ HTTP/1.1\r\nHost:\r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "GETS is not GET", raw: "GETS http://example.org/ HTTP/1.1\r\n\(host)\r\n",
        expected: .head(method: "GETS", target: "http://example.org/", version: "HTTP/1.1")),
    // Incomplete
    Case(name: "no blank line yet", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)", expected: .incomplete),
    Case(name: "half a request line", raw: "GET http://exa", expected: .incomplete),
    // Rejected
    Case(name: "bare LF line ending", raw: "GET http://example.org/ HTTP/1.1\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "bare CR inside a header", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)X: a\rb\r\n\r\n", expected: .rejected(400)),
    Case(name: "obs-fold", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)X: a\r\n b\r\n\r\n", expected: .rejected(400)),
    Case(
        name: "space before colon", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)Content-Length : 5\r\n\r\n", expected: .rejected(400)),
    Case(name: "NUL in value", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)X: a\u{0}b\r\n\r\n", expected: .rejected(400)),
    Case(name: "control char in value", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)X: a\u{1}b\r\n\r\n", expected: .rejected(400)),
    Case(name: "missing Host in HTTP/1.1", raw: "GET http://example.org/ HTTP/1.1\r\n\r\n", expected: .rejected(400)),
    Case(name: "two Host headers", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)\(host)\r\n", expected: .rejected(400)),
    Case(name: "HTTP/2.0 request line", raw: "GET http://example.org/ HTTP/2.0\r\n\(host)\r\n", expected: .rejected(505)),
    Case(name: "lower-case version", raw: "GET http://example.org/ http/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "double space in request line", raw: "GET  http://example.org/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "invalid method char", raw: "G(T http://example.org/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "userinfo in URL", raw: "GET http://user:pw@example.org/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "bad port", raw: "GET http://example.org:99999/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "port zero", raw: "GET http://example.org:0/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "non-numeric port", raw: "GET http://example.org:8o/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "unsupported scheme", raw: "GET ftp://example.org/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "fragment in target", raw: "GET http://example.org/#frag HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "malformed percent escape", raw: "GET http://example.org/%zz HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "non-ASCII in target", raw: "GET http://example.org/caf\u{e9} HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "empty host", raw: "GET http:///x HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "invalid host char", raw: "GET http://exa$mple.org/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "CONNECT without port", raw: "CONNECT example.org HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "asterisk with GET", raw: "GET * HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "header without colon", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)Broken\r\n\r\n", expected: .rejected(400)),
    Case(
        name: "Host the target's authority, with a port", raw: "GET http://example.org:8080/x HTTP/1.1\r\nHost: example.org:8080\r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org:8080/x", version: "HTTP/1.1")),
    Case(
        name: "Host the target's authority, in other case", raw: "GET http://Example.ORG/ HTTP/1.1\r\nHost:  Example.ORG \r\n\r\n",
        expected: .head(method: "GET", target: "http://example.org/", version: "HTTP/1.1")),
    Case(
        name: "Host the target's authority but a bad port", raw: "GET http://example.org:8080/ HTTP/1.1\r\nHost: example.org:80800\r\n\r\n",
        expected: .rejected(400)),
    Case(
        name: "Host the target's authority and more", raw: "GET http://example.org/ HTTP/1.1\r\nHost: example.org/x\r\n\r\n",
        expected: .rejected(400)),
    Case(
        name: "Host with userinfo the target's authority lacks", raw: "GET http://example.org/ HTTP/1.1\r\nHost: u@example.org\r\n\r\n",
        expected: .rejected(400)),
    Case(name: "Host with userinfo", raw: "GET http://example.org/ HTTP/1.1\r\nHost: u@example.org\r\n\r\n", expected: .rejected(400)),
    Case(name: "Host with a bad port", raw: "GET http://example.org/ HTTP/1.1\r\nHost: example.org:0\r\n\r\n", expected: .rejected(400)),
    Case(name: "Host with a space inside", raw: "GET http://example.org/ HTTP/1.1\r\nHost: exa mple.org\r\n\r\n", expected: .rejected(400)),
    Case(
        name: "Host twice, names in different case", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)HOST: example.org\r\n\r\n",
        expected: .rejected(400)),
    Case(name: "port of six digits", raw: "GET http://example.org:000080/ HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(name: "tab in request target", raw: "GET http://example.org/\ta HTTP/1.1\r\n\(host)\r\n", expected: .rejected(400)),
    Case(
        name: "too many fields", raw: "GET http://example.org/ HTTP/1.1\r\n\(host)\(String(repeating: "X: 1\r\n", count: 128))\r\n",
        expected: .rejected(431)),
    Case(name: "empty header name", raw: "GET http://example.org/ HTTP/1.1\r\n\(host): v\r\n\r\n", expected: .rejected(400)),
]

@Suite(.timeLimit(.minutes(1))) struct RequestHeadParserTests {
    @Test(arguments: cases)
    fileprivate func parsesOrRejects(_ testCase: Case) {
        #expect(parse(testCase.raw) == testCase.expected)
    }

    @Test func headLargerThanLimitGets431() {
        let big = "GET http://example.org/ HTTP/1.1\r\n\(host)X: \(String(repeating: "a", count: 2000))\r\n\r\n"
        #expect(parse(big, maxHeadBytes: 1024) == .rejected(431))
    }

    @Test func requestLineLongerThanLimitGets414() {
        let long = "GET http://example.org/\(String(repeating: "a", count: 2000))"
        #expect(parse(long, maxHeadBytes: 1024) == .rejected(414))
    }

    @Test func headArrivingByteByByteParsesOnce() throws {
        let raw = Array("GET http://example.org/x HTTP/1.1\r\n\(host)Accept: */*\r\n\r\nNEXT".utf8)
        var parser = RequestHeadParser()
        var completed: (RequestHead, Int)?
        for end in 1...raw.count {
            let outcome = try raw[0..<end].withUnsafeBytes { try parser.parse($0) }
            if case .complete(let head, let length) = outcome {
                completed = (head, length)
                break
            }
        }
        let (head, length) = try #require(completed)
        #expect(head.headers["accept"] == "*/*")
        #expect(length == raw.count - 4)
    }

    @Test func keepAliveFollowsVersionAndConnection() throws {
        func head(_ raw: String) throws -> RequestHead {
            var parser = RequestHeadParser()
            guard case .complete(let head, _) = try Array(raw.utf8).withUnsafeBytes({ try parser.parse($0) }) else {
                throw HTTPParseError(0, "incomplete")
            }
            return head
        }
        #expect(try head("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n").keepAlive)
        #expect(try !head("GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keepAlive)
        #expect(try !head("GET http://a/ HTTP/1.0\r\n\r\n").keepAlive)
        #expect(try head("GET http://a/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepAlive)
        #expect(try head("GET http://a/ HTTP/1.0\r\nProxy-Connection: Keep-Alive\r\n\r\n").keepAlive)
        #expect(try !head("GET http://a/ HTTP/1.1\r\nHost: a\r\nProxy-Connection: foo,\tCLOSE \r\n\r\n").keepAlive)
        #expect(try !head("GET http://a/ HTTP/1.0\r\nConnection: keep-alive-ish, closed\r\n\r\n").keepAlive)
        #expect(try head("GET http://a/ HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n").expectsContinue)
        #expect(try !head("GET http://a/ HTTP/1.1\r\nHost: a\r\nExpect: 100-continue-later\r\n\r\n").expectsContinue)
    }

    /// The request target's scan against the byte-by-byte rule it replaced: up to the first
    /// space, any byte below 0x20 or from 0x7F up is "invalid character in request target", and
    /// a line without that space is "malformed request line"; a target that passes goes on to
    /// the same checks as before. 20,000 seeded targets of 0 to 40 bytes (shorter than a word,
    /// across words, with a tail), spaces, tabs, controls, DEL and high bytes anywhere in them.
    @Test func requestTargetsAreScannedAsByteByByte() {
        var random = SplitMix64(seed: 0x6161)
        let plain = Array("http://a.example/x?q=1%20".utf8)
        let odd: [UInt8] = [0x20, 0x09, 0x00, 0x1F, 0x21, 0x7E, 0x7F, 0x80, 0xC3, 0xFF]
        for round in 0..<20_000 {
            var target: [UInt8] = []
            for _ in 0..<(random.next() % 41) {
                let pick = random.next()
                target.append(pick % 8 == 0 ? odd[Int(pick / 8 % UInt64(odd.count))] : plain[Int(pick / 8 % UInt64(plain.count))])
            }
            let version = random.next() % 4 == 0 ? [] : Array(" HTTP/1.1".utf8)
            let line = Array("GET ".utf8) + target + version
            let rest = line[4...]
            let end = rest.firstIndex(of: 0x20) ?? line.endIndex
            let expected: String? =
                rest[..<end].contains(where: { $0 < 0x20 || $0 >= 0x7F })
                ? "invalid character in request target" : end == line.endIndex ? "malformed request line" : nil
            var parser = RequestHeadParser()
            var reason: String?
            do {
                _ = try (line + Array("\r\nHost: a.example\r\n\r\n".utf8)).withUnsafeBytes { try parser.parse($0) }
            } catch let error as HTTPParseError {
                reason = error.reason
            } catch {
                reason = "\(error)"
            }
            if let expected {
                #expect(reason == expected, "round \(round): \(line)")
            } else {
                #expect(reason != "invalid character in request target" && reason != "malformed request line", "round \(round): \(line)")
            }
        }
    }
}

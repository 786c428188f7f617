/// Malformed, ambiguous and oversized requests, each with what RFC 9112/9110 require of a
/// proxy that receives it. In the request text `%URL` becomes the origin URL of a path unique
/// to the case, `%AUTH` the origin's `host:port`, `%SELF` the proxy's own `host:port`.
struct HostileCase: Sendable, CustomStringConvertible {
    let name: String
    let request: [UInt8]
    /// The status the client must get.
    let status: Int
    /// Whether the request may reach the origin (only for the few that are valid HTTP).
    let forwarded: Bool
    /// Whether the proxy must close the connection after answering (framing that cannot be
    /// trusted: RFC 9112 §6.3, §11.2).
    let closes: Bool

    var description: String { name }

    init(_ name: String, _ request: String, _ status: Int, forwarded: Bool = false, closes: Bool = true) {
        self.init(name, Array(request.utf8), status, forwarded: forwarded, closes: closes)
    }

    init(_ name: String, _ request: [UInt8], _ status: Int, forwarded: Bool = false, closes: Bool = true) {
        self.name = name
        self.request = request
        self.status = status
        self.forwarded = forwarded
        self.closes = closes
    }
}

enum HostileCorpus {
    static let host = "Host: %AUTH\r\n"

    static let cases: [HostileCase] = framing + chunked + syntax + limits + requestLine + targets + hostAndConnect

    /// Request smuggling through body framing (RFC 9112 §6).
    static let framing: [HostileCase] = [
        HostileCase("CL.TE", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX", 400),
        HostileCase("TE.CL", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\nX", 400),
        HostileCase("TE chunked, identity", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE xchunked", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase(
            "TE chunked then identity on two lines",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE identity", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: identity\r\n\r\nhello", 400),
        HostileCase(
            "TE gzip, chunked (not implemented)", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        HostileCase("TE chunked twice", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE with space before colon", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE with a parameter", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE with vertical tab", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding:\u{0B}chunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE empty", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: \r\n\r\n", 400),
        HostileCase("TE empty list element", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase("TE in an HTTP/1.0 request", "POST %URL HTTP/1.0\r\n\(host)Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        HostileCase(
            "TE upper-case CHUNKED (valid)", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200,
            forwarded: true, closes: false),
        HostileCase(
            "duplicate Content-Length, different", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
        HostileCase("Content-Length list, different", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 5, 6\r\n\r\nhello!", 400),
        HostileCase(
            "Content-Length list, identical (valid, RFC 9110 §8.6)",
            "POST %URL HTTP/1.1\r\n\(host)Content-Length: 5, 5\r\n\r\nhello", 200, forwarded: true, closes: false),
        HostileCase("signed Content-Length +5", "POST %URL HTTP/1.1\r\n\(host)Content-Length: +5\r\n\r\nhello", 400),
        HostileCase("negative Content-Length", "POST %URL HTTP/1.1\r\n\(host)Content-Length: -5\r\n\r\nhello", 400),
        HostileCase("hex Content-Length", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 0x5\r\n\r\nhello", 400),
        HostileCase("Content-Length with inner space", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 5 5\r\n\r\nhello", 400),
        HostileCase("Content-Length overflow", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 99999999999999999999999\r\n\r\nhello", 400),
        HostileCase("Content-Length empty", "POST %URL HTTP/1.1\r\n\(host)Content-Length: \r\n\r\n", 400),
        HostileCase("Content-Length with trailing junk", "POST %URL HTTP/1.1\r\n\(host)Content-Length: 5abc\r\n\r\nhello", 400),
    ]

    /// The chunked coding (RFC 9112 §7.1).
    static let chunked: [HostileCase] = [
        HostileCase(
            "chunk size overflow",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n", 400),
        HostileCase("chunk size negative", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n-1\r\nhello\r\n0\r\n\r\n", 400),
        HostileCase(
            "chunk size with leading space", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n", 400),
        HostileCase(
            "chunk size 0x prefix", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400),
        HostileCase("chunk size not hex", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
        HostileCase(
            "chunk data longer than its size", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", 400
        ),
        HostileCase(
            "chunk size line ended by bare LF", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400),
        HostileCase(
            "chunk data ended by bare LF", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n", 400),
        HostileCase(
            "chunk extension with bare CR", "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5;a\rb\r\nhello\r\n0\r\n\r\n",
            400),
        HostileCase(
            "chunk extension of 70 KB",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5;\(String(repeating: "x", count: 70_000))\r\nhello\r\n0\r\n\r\n",
            400),
        HostileCase(
            "chunk extension (valid, ignored)",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n", 200, forwarded: true,
            closes: false),
        HostileCase(
            "chunk extension with quoted string (valid)",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5;n=\"a b\"\r\nhello\r\n0\r\n\r\n", 200, forwarded: true,
            closes: false),
    ]

    /// Bytes that do not belong in a head (RFC 9112 §2.2, §5).
    static let syntax: [HostileCase] = [
        HostileCase("bare CR in the request line", "GET %URL HTTP/1.1\r\(host)\r\n", 400),
        HostileCase("bare LF line endings", "GET %URL HTTP/1.1\nHost: %AUTH\n\n", 400),
        HostileCase("bare CR in a header value", "GET %URL HTTP/1.1\r\n\(host)X-A: 1\r2\r\n\r\n", 400),
        HostileCase("NUL in a header value", "GET %URL HTTP/1.1\r\n\(host)X-A: 1\u{0}2\r\n\r\n", 400),
        HostileCase("NUL in the request target", "GET %URL\u{0} HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("NUL in a header name", "GET %URL HTTP/1.1\r\n\(host)X\u{0}A: 1\r\n\r\n", 400),
        HostileCase("DEL in a header value", "GET %URL HTTP/1.1\r\n\(host)X-A: 1\u{7F}\r\n\r\n", 400),
        HostileCase("BEL in a header value", "GET %URL HTTP/1.1\r\n\(host)X-A: \u{7}\r\n\r\n", 400),
        HostileCase("obs-fold with space", "GET %URL HTTP/1.1\r\n\(host)X-A: 1\r\n 2\r\n\r\n", 400),
        HostileCase("obs-fold with tab", "GET %URL HTTP/1.1\r\n\(host)X-A: 1\r\n\t2\r\n\r\n", 400),
        HostileCase("whitespace before the first header", "GET %URL HTTP/1.1\r\n \(host)\r\n", 400),
        HostileCase("space inside a header name", "GET %URL HTTP/1.1\r\n\(host)X A: 1\r\n\r\n", 400),
        HostileCase("space before the colon", "GET %URL HTTP/1.1\r\n\(host)X-A : 1\r\n\r\n", 400),
        HostileCase("tab before the colon", "GET %URL HTTP/1.1\r\n\(host)X-A\t: 1\r\n\r\n", 400),
        HostileCase("empty header name", "GET %URL HTTP/1.1\r\n\(host): 1\r\n\r\n", 400),
        HostileCase("header line without colon", "GET %URL HTTP/1.1\r\n\(host)X-A 1\r\n\r\n", 400),
        HostileCase("non-token character in a header name", "GET %URL HTTP/1.1\r\n\(host)X-A(: 1\r\n\r\n", 400),
        HostileCase("TLS ClientHello on the plain-HTTP port", [0x16, 0x03, 0x01, 0x00, 0xA5, 0x01, 0x00, 0x00, 0xA1, 0x03, 0x03], 400),
        HostileCase("binary junk", [0x00, 0xFF, 0xFE, 0x0D, 0x0A, 0x0D, 0x0A], 400),
        HostileCase(
            "obs-text in a header value (valid)", Array("GET %URL HTTP/1.1\r\n\(host)X-A: ".utf8) + [0x80, 0xFF] + Array("\r\n\r\n".utf8),
            200, forwarded: true, closes: false),
        HostileCase(
            "empty lines before the request line (valid, RFC 9112 §2.2)", "\r\n\r\nGET %URL HTTP/1.1\r\n\(host)\r\n", 200,
            forwarded: true, closes: false),
    ]

    /// Sizes (RFC 9112 §3, RFC 6585 §5).
    static let limits: [HostileCase] = [
        HostileCase("request line of 70 KB", "GET %URL?\(String(repeating: "a", count: 70_000)) HTTP/1.1\r\n\(host)\r\n", 414),
        HostileCase("header of 70 KB", "GET %URL HTTP/1.1\r\n\(host)X-A: \(String(repeating: "a", count: 70_000))\r\n\r\n", 431),
        HostileCase("200 header fields", "GET %URL HTTP/1.1\r\n\(host)\((0..<200).map { "X-\($0): 1\r\n" }.joined())\r\n", 431),
    ]

    /// The request line (RFC 9112 §3).
    static let requestLine: [HostileCase] = [
        HostileCase("invalid character in the method", "GE(T %URL HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("two spaces after the method", "GET  %URL HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("tab as separator", "GET\t%URL HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("missing version (HTTP/0.9 style)", "GET %URL\r\n\(host)\r\n", 400),
        HostileCase("lower-case version", "GET %URL http/1.1\r\n\(host)\r\n", 400),
        HostileCase("trailing space after the version", "GET %URL HTTP/1.1 \r\n\(host)\r\n", 400),
        HostileCase("two-digit minor version", "GET %URL HTTP/1.10\r\n\(host)\r\n", 400),
        HostileCase("HTTP/2.0 in an HTTP/1 request line", "GET %URL HTTP/2.0\r\n\(host)\r\n", 505),
        HostileCase("HTTP/3.0", "GET %URL HTTP/3.0\r\n\(host)\r\n", 505),
        HostileCase("HTTP/1.2 is answered as 1.1 (RFC 9110 §2.5)", "GET %URL HTTP/1.2\r\n\(host)\r\n", 200, forwarded: true, closes: false),
        HostileCase(
            "lower-case method is a different method, forwarded (RFC 9110 §9.1)", "get %URL HTTP/1.1\r\n\(host)\r\n", 200,
            forwarded: true, closes: false),
    ]

    /// Request targets (RFC 9112 §3.2, RFC 3986).
    static let targets: [HostileCase] = [
        HostileCase("absolute-form with userinfo", "GET http://user:pass@%AUTH/x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("absolute-form with port 99999", "GET http://127.0.0.1:99999/x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("absolute-form with a non-numeric port", "GET http://127.0.0.1:8o/x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("absolute-form with an empty host", "GET http:///x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("absolute-form with an unsupported scheme", "GET ftp://%AUTH/x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("absolute-form with a fragment", "GET %URL#frag HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("incomplete percent-encoding", "GET %URL%2 HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("invalid percent-encoding", "GET %URL%zz HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("space inside the target", "GET %URL/a b HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("backslash inside the host", "GET http://127.0.0.1\\@evil/x HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("origin-form target sent to a proxy", "GET /x HTTP/1.1\r\n\(host)\r\n", 400, closes: false),
        HostileCase("asterisk-form with GET", "GET * HTTP/1.1\r\n\(host)\r\n", 400),
        HostileCase("request aimed at the proxy itself", "GET http://%SELF/x HTTP/1.1\r\nHost: %SELF\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 127.1", "GET http://127.1:%ADMINPORT/stats HTTP/1.1\r\nHost: 127.1:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 0.0.0.0", "GET http://0.0.0.0:%ADMINPORT/stats HTTP/1.1\r\nHost: 0.0.0.0:%ADMINPORT\r\n\r\n",
            403),
        HostileCase("admin API through the proxy as 0", "GET http://0:%ADMINPORT/stats HTTP/1.1\r\nHost: 0:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 2130706433",
            "GET http://2130706433:%ADMINPORT/stats HTTP/1.1\r\nHost: 2130706433:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 0x7f000001",
            "GET http://0x7f000001:%ADMINPORT/stats HTTP/1.1\r\nHost: 0x7f000001:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 0177.0.0.1",
            "GET http://0177.0.0.1:%ADMINPORT/stats HTTP/1.1\r\nHost: 0177.0.0.1:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as 127.000.000.001",
            "GET http://127.000.000.001:%ADMINPORT/stats HTTP/1.1\r\nHost: 127.000.000.001:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as localhost",
            "GET http://localhost:%ADMINPORT/stats HTTP/1.1\r\nHost: localhost:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as [::]", "GET http://[::]:%ADMINPORT/stats HTTP/1.1\r\nHost: [::]:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "admin API through the proxy as [::ffff:127.0.0.1]",
            "GET http://[::ffff:127.0.0.1]:%ADMINPORT/stats HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:%ADMINPORT\r\n\r\n", 403),
        HostileCase(
            "cache clear through the proxy as 0.0.0.0",
            "DELETE http://0.0.0.0:%ADMINPORT/cache HTTP/1.1\r\nHost: 0.0.0.0:%ADMINPORT\r\n\r\n", 403),
        HostileCase("the unspecified address as a destination", "GET http://0.0.0.0:%PORT/x HTTP/1.1\r\nHost: 0.0.0.0:%PORT\r\n\r\n", 403),
        HostileCase(
            "a chunked body that turns bad after a valid chunk",
            "POST %URL HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", 400),
        HostileCase(
            "percent-encoded NUL is data, forwarded verbatim", "GET %URL/%00 HTTP/1.1\r\n\(host)\r\n", 200,
            forwarded: true, closes: false),
    ]

    /// Host and CONNECT (RFC 9112 §3.2, §3.2.3; RFC 9110 §9.3.6).
    static let hostAndConnect: [HostileCase] = [
        HostileCase("HTTP/1.1 without Host", "GET %URL HTTP/1.1\r\n\r\n", 400),
        HostileCase("two Host headers", "GET %URL HTTP/1.1\r\n\(host)\(host)\r\n", 400),
        HostileCase("Host with a space", "GET %URL HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        HostileCase("Host with userinfo", "GET %URL HTTP/1.1\r\nHost: user@%AUTH\r\n\r\n", 400),
        HostileCase("Host with a bad port", "GET %URL HTTP/1.1\r\nHost: %AUTH0000\r\n\r\n", 400),
        HostileCase("HTTP/1.0 without Host (valid)", "GET %URL HTTP/1.0\r\n\r\n", 200, forwarded: true, closes: true),
        HostileCase("CONNECT without a port", "CONNECT example.org HTTP/1.1\r\nHost: example.org\r\n\r\n", 400),
        HostileCase("CONNECT with an absolute URL", "CONNECT http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n", 400),
        HostileCase("CONNECT with userinfo", "CONNECT user@example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", 400),
        HostileCase("CONNECT with a body", "CONNECT %AUTH HTTP/1.1\r\nHost: %AUTH\r\nContent-Length: 5\r\n\r\nhello", 400),
        HostileCase("CONNECT to a port not in connect_ports", "CONNECT %AUTH HTTP/1.1\r\nHost: %AUTH\r\n\r\n", 403),
        HostileCase("CONNECT to the proxy itself", "CONNECT %SELF HTTP/1.1\r\nHost: %SELF\r\n\r\n", 403),
    ]
}

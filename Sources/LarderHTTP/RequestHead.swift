/// A parsed request line and header section.
public struct RequestHead: Sendable {
    public var method: HTTPMethod
    public var target: RequestTarget
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    public init(method: HTTPMethod, target: RequestTarget, version: HTTPVersion, headers: HTTPHeaders) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The absolute URL, when the target is in absolute form.
    public var url: AbsoluteURL? {
        if case .absolute(let url) = target { return url }
        return nil
    }

    /// The request target as text, for logs and messages.
    public var targetText: String {
        switch target {
        case .origin(let path): path
        case .authority(let host, let port): "\(host):\(port)"
        case .asterisk: "*"
        case .absolute(let url): url.description
        }
    }

    /// Whether the client wants the connection kept open after this exchange
    /// (RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive").
    public var keepAlive: Bool {
        if headers.hasListElement(.connection, "close") || headers.hasListElement("Proxy-Connection", "close") { return false }
        if version == .http1_1 { return true }
        return headers.hasListElement(.connection, "keep-alive") || headers.hasListElement("Proxy-Connection", "keep-alive")
    }

    /// Whether the client sent `Expect: 100-continue`.
    public var expectsContinue: Bool {
        headers.hasListElement("Expect", "100-continue")
    }
}

/// A status line and header section.
public struct ResponseHead: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    /// The Content-Length the head declares, once ``ResponseHeadParser`` has checked it is
    /// unambiguous (``BodyFraming/checkResponse(_:)``); nil when it declares none.
    public var declaredLength: Int?

    public init(status: Int, reason: String? = nil, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.reason = reason ?? HTTPStatus.reason(status)
        self.version = version
        self.headers = headers
    }

    /// Whether the response to `method` carries no body regardless of its headers
    /// (RFC 9112 §6.3 rules 1 and 2).
    public func hasNoBody(for method: HTTPMethod) -> Bool {
        method == .head || status == 204 || status == 304 || (100..<200).contains(status)
    }
}

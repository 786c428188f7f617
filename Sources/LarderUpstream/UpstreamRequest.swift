import LarderHTTP
import LarderIO

/// A request to send upstream: already rewritten for forwarding (hop-by-hop fields removed,
/// `Host` from the URL, `Via` appended).
public struct UpstreamRequest: Sendable {
    /// What stays the same from attempt to attempt, held once: a request is copied into its
    /// fill, into each transfer and through each attempt, and each copy of these fields would
    /// retain and release a dozen strings and arrays.
    private final class Message: Sendable {
        let method: HTTPMethod
        let url: AbsoluteURL
        let headers: HTTPHeaders
        let body: BodyLength?
        let destinationCheck: DestinationCheck?

        init(method: HTTPMethod, url: AbsoluteURL, headers: HTTPHeaders, body: BodyLength?, destinationCheck: DestinationCheck?) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.destinationCheck = destinationCheck
        }
    }

    private var message: Message
    public var method: HTTPMethod { _read { yield message.method } }
    public var url: AbsoluteURL { _read { yield message.url } }
    public var headers: HTTPHeaders { _read { yield message.headers } }
    /// The request body: nil for none, otherwise its length (nil inside for unknown, sent chunked).
    public var body: BodyLength? { message.body }
    /// Time allowed to connect, in nanoseconds. Timeouts are held as integers: a `Duration`'s
    /// conversion takes 128-bit division, and these are read for every transfer.
    public var connectTimeoutNanos: UInt64
    /// Time allowed for the response head, and then for any stall of the body, in nanoseconds.
    public var timeoutNanos: UInt64
    /// The body must average at least this many bytes a second over every `timeout`-long
    /// window (0: no minimum), so a trickling origin is cut too.
    public var minRate = 0
    /// Open a new connection instead of reusing a pooled one.
    public var freshConnection = false
    /// A parent proxy URL (`http://user:pass@host:port`), or nil for direct.
    public var parentProxy: String?
    /// Decides, for each address a direct transfer is about to connect to or send on (a pooled
    /// connection included), whether it may (nil: every address may be used). Not asked for a
    /// parent's address.
    public var destinationCheck: DestinationCheck? { message.destinationCheck }
    /// A PEM file of trust anchors for an `https` origin, besides the system store
    /// (`tls.upstream_ca_file`); nil for the system store alone.
    public var extraTrustAnchors: String?

    /// The length of a request body.
    public enum BodyLength: Sendable, Equatable {
        case known(Int)
        case unknown
    }

    public init(
        method: HTTPMethod, url: AbsoluteURL, headers: HTTPHeaders, body: BodyLength? = nil,
        connectTimeoutNanos: UInt64 = 5_000_000_000, timeoutNanos: UInt64 = 60_000_000_000, parentProxy: String? = nil,
        destinationCheck: DestinationCheck? = nil
    ) {
        message = Message(method: method, url: url, headers: headers, body: body, destinationCheck: destinationCheck)
        self.connectTimeoutNanos = connectTimeoutNanos
        self.timeoutNanos = timeoutNanos
        self.parentProxy = parentProxy
    }

    /// The same request without `If-None-Match` and `If-Modified-Since`: sent again when the
    /// origin's 304 to the validation named another representation (RFC 9111 §4.3.4).
    public func withoutValidators() -> UpstreamRequest {
        var headers = message.headers
        headers.remove(.ifNoneMatch)
        headers.remove(.ifModifiedSince)
        var request = self
        request.message = Message(
            method: message.method, url: message.url, headers: headers, body: message.body, destinationCheck: message.destinationCheck)
        return request
    }
}

import LarderHTTP
import LarderUpstream

/// Why a request failed, as its access line says: one token from this closed set, the same in
/// every `log.access_format` (docs/OPERATIONS.md lists them). A request that succeeded, or
/// whose status came from the origin, has none.
enum FailureCause: String, Sendable, CaseIterable {
    /// The origin's (or parent's) name did not resolve.
    case dns
    /// The connection was refused or the host unreachable.
    case connect
    /// The origin's TLS certificate did not verify, or its handshake broke.
    case tls
    /// No answer (or no connection, or no name) within the upstream timeouts.
    case timeout
    /// The connection dropped before any response byte.
    case reset
    /// The connection dropped in the middle of the body.
    case truncated
    /// The origin sent something that is not HTTP, or a body unlike its framing.
    case framing
    /// The body did not match the digest its URL names.
    case digest
    /// The destination policy, `proxy.connect_ports` or an intercepted tunnel's host refused it.
    case refused
    /// The request had already passed through this proxy (RFC 9110 §7.6.3).
    case loop
    /// Proxy authentication failed or was missing (407).
    case auth
    /// A resource limit: head or body too large, too many authentications waiting.
    case limit
    /// The request itself was malformed or cannot be proxied.
    case request
    /// A parent proxy refused the request or could not be reached.
    case parent
    /// A stored copy failed its check while being sent (a damaged disk).
    case disk
    /// `cache.offline` and nothing stored.
    case offline
    /// `only-if-cached` and nothing stored (RFC 9111 §5.2.1.7).
    case uncached
    /// The client sent no complete head within `proxy.header_timeout`.
    case clientTimeout = "client-timeout"
    /// The client closed before its answer was complete.
    case clientGone = "client-gone"
    /// Anything else the upstream side reported (or Larder stopped the transfer).
    case upstream

    /// The cause of an upstream failure.
    init(_ error: UpstreamError) {
        switch error.kind {
        case .dns: self = .dns
        case .connect: self = .connect
        case .timeout: self = .timeout
        case .reset: self = .reset
        case .truncated: self = .truncated
        case .tls: self = .tls
        case .protocolError: self = .framing
        case .digest: self = .digest
        case .forbidden: self = .refused
        case .aborted, .other: self = .upstream
        }
    }

    /// The cause of a request rejected while it was read: its size, or its form.
    init(_ error: HTTPParseError) {
        self = error.status == 413 || error.status == 414 || error.status == 431 ? .limit : .request
    }

    /// For a line Larder answered with an error status without naming a cause (a path that
    /// does not set one): what the status says.
    static func implied(byStatus status: Int) -> FailureCause? {
        switch status {
        case 407: .auth
        case 403, 421: .refused
        case 408: .clientTimeout
        case 413, 414, 431, 503: .limit
        case 508: .loop
        case 504: .timeout
        case 400..<500: .request
        case 500...: .upstream
        default: nil
        }
    }

    /// Squid's error code for the cause (its `%err_code`), written with the token as the
    /// detail (`%err_code/%err_detail`) in the squid format.
    var squidErrorCode: String {
        switch self {
        case .dns: "ERR_DNS_FAIL"
        case .connect, .parent: "ERR_CONNECT_FAIL"
        case .tls: "ERR_SECURE_CONNECT_FAIL"
        case .timeout: "ERR_READ_TIMEOUT"
        case .reset, .truncated, .disk: "ERR_READ_ERROR"
        case .framing, .digest: "ERR_INVALID_RESP"
        case .refused, .loop: "ERR_ACCESS_DENIED"
        case .auth: "ERR_CACHE_ACCESS_DENIED"
        case .limit: "ERR_TOO_BIG"
        case .request: "ERR_INVALID_REQ"
        case .offline, .uncached: "ERR_ONLY_IF_CACHED_MISS"
        case .clientTimeout: "ERR_REQUEST_START_TIMEOUT"
        case .clientGone: "ERR_CLIENT_GONE"
        case .upstream: "ERR_GATEWAY_FAILURE"
        }
    }
}

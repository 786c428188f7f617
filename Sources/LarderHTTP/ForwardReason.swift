/// Why a cache sent a request forward rather than answering from what it stores: the `fwd`
/// parameter of `Cache-Status` (RFC 9211 §2.2). Decisions read the case; the text is written
/// only into the header and the log.
public enum ForwardReason: String, Sendable, CaseIterable {
    /// The cache was configured not to handle this request (a `network-only` route).
    case bypass
    /// The request method is not one the cache answers from storage.
    case method
    /// Nothing stored under the request's key.
    case uriMiss = "uri-miss"
    /// Something stored under the key, but not for this request's `Vary` selecting fields.
    case varyMiss = "vary-miss"
    /// Not in the cache, said where the reason is no more precise (offline, only-if-cached).
    case miss
    /// The request's own directives or preconditions sent it forward (`no-cache`, `If-Match`).
    case request
    /// What is stored is stale and had to be validated or replaced.
    case stale
    /// Part of the response is stored and the rest was fetched (slices).
    case partial

    /// Whether a forward of this kind validates a stored response with its own validators
    /// (RFC 9111 §4.3.1): a stale one, or one the client's `no-cache` sends to the origin.
    public var validatesStored: Bool { self == .stale || self == .request }
}

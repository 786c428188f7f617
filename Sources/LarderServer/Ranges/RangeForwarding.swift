/// What a proxied GET's `Range` becomes upstream (RFC 9110 §14.2). An exchange starts at
/// ``none``; a request with Range for something not stored is ``stripped``; a fill that finds
/// the object too large to fetch whole releases it to ``passed``, which it never leaves.
enum RangeForwarding: Equatable, Sendable {
    /// No Range, or one answered from a stored response.
    case none
    /// The range is taken off the upstream request: the whole object is fetched (and stored)
    /// and this client gets its slice.
    case stripped
    /// The range goes upstream as the client sent it, and the fill is not shared.
    case passed
}

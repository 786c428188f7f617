import LarderHTTP

/// The response Cache-Control directives a cache consults when it reuses a stored response
/// (RFC 9111 §5.2.2, RFC 5861), parsed once when the response is stored.
public struct ResponseDirectives: Sendable, Equatable {
    public var noCache = false
    public var mustRevalidate = false
    public var proxyRevalidate = false
    public var hasSMaxAge = false
    public var isPublic = false
    public var immutable = false
    /// `private`, or `no-store` without must-understand (RFC 9111 §5.2.2.3, §5.2.2.5,
    /// §5.2.2.7): a shared cache must not have stored it. Only an entry written by an older
    /// version (whose cache_first kept them) carries it; it is never served.
    public var forbidsSharedStorage = false
    /// RFC 5861 §3.
    public var staleWhileRevalidate: Int?
    /// RFC 5861 §4.
    public var staleIfError: Int?

    public init() {}

    public init(_ cacheControl: CacheControl) {
        // §5.2.2.4: a qualified no-cache ("no-cache=Set-Cookie") may be treated as unqualified.
        noCache = cacheControl.noCache
        mustRevalidate = cacheControl.mustRevalidate
        proxyRevalidate = cacheControl.proxyRevalidate
        hasSMaxAge = cacheControl.sMaxAge != nil
        isPublic = cacheControl.isPublic
        immutable = cacheControl.immutable
        forbidsSharedStorage = cacheControl.isPrivate || cacheControl.noStore && !cacheControl.mustUnderstand
        staleWhileRevalidate = cacheControl.staleWhileRevalidate
        staleIfError = cacheControl.staleIfError
    }

    /// §4.2.4: a stale response must not be served without validation when the response says
    /// so (must-revalidate; for a shared cache also proxy-revalidate and s-maxage, which implies
    /// proxy-revalidate, §5.2.2.10), nor when it is no-cache.
    public var forbidsStale: Bool { noCache || mustRevalidate || proxyRevalidate || hasSMaxAge }
}

/// The request Cache-Control directives (RFC 9111 §5.2.1), with Pragma: no-cache standing in for
/// no-cache when there is no Cache-Control (§5.4).
public struct RequestDirectives: Sendable, Equatable {
    public var noCache = false
    public var noStore = false
    public var onlyIfCached = false
    public var maxAge: Int?
    public var maxStale: Int?
    public var minFresh: Int?
    public var staleIfError: Int?

    public init() {}

    public init(_ headers: HTTPHeaders) {
        let cacheControl = CacheControl(headers)
        if cacheControl.isEmpty {
            noCache = headers.hasListElement("Pragma", "no-cache")
            return
        }
        noCache = cacheControl.noCache
        noStore = cacheControl.noStore
        onlyIfCached = cacheControl.onlyIfCached
        maxAge = cacheControl.maxAge
        maxStale = cacheControl.maxStale
        minFresh = cacheControl.minFresh
        staleIfError = cacheControl.staleIfError
    }

    public static let none = RequestDirectives()
}

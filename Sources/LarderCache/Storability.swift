import LarderHTTP

/// Whether a shared cache may store a response (RFC 9111 §3).
public enum Storability {
    /// The verdict, with a reason for logs and `Cache-Status` details.
    public enum Decision: Sendable, Equatable {
        case store
        case doNotStore(String)

        public var canStore: Bool { self == .store }
    }

    /// Applies §3 for a shared cache to a response to a `GET`. With `ignoringCacheControl`
    /// (the `cache_first` policy, for immutable content) a 200 needs nothing to make it
    /// cacheable: its lifetime does not matter. Every other status follows §3 as on any route
    /// (a 404 kept as long as a package would pin a failure), and `no-store`, `private` and the
    /// safety rules (Authorization, Set-Cookie, Vary: *) hold whatever the policy.
    /// `responseCacheControl`, when given, is `responseHeaders`' Cache-Control already parsed.
    public static func decide(
        method: HTTPMethod, requestHeaders: HTTPHeaders, status: Int, responseHeaders: HTTPHeaders,
        ignoringCacheControl: Bool = false, responseCacheControl: CacheControl? = nil
    ) -> Decision {
        guard method == .get else { return .doNotStore("method") }
        let response = responseCacheControl ?? CacheControl(responseHeaders)
        let request = CacheControl(requestHeaders)
        // §3: the status is final; 206 and 304 only if understood (we do not combine ranges).
        guard status >= 200, status != 206, status != 304 else { return .doNotStore("status") }
        // §5.2.1.5: request no-store forbids storing the response.
        if request.noStore { return .doNotStore("request no-store") }
        // §5.2.2.3: must-understand lets a cache that knows the status ignore no-store.
        let understood =
            status == 200 || Freshness.heuristicallyCacheable.contains(status) || [203, 204, 300, 301, 302, 303, 307, 308].contains(status)
        if response.noStore && !(response.mustUnderstand && understood) { return .doNotStore("no-store") }
        // §5.2.2.7: a shared cache must not store a private response.
        if response.isPrivate { return .doNotStore("private") }
        // §3.5: Authorization only with public, s-maxage or must-revalidate; never on cache_first's
        // own terms, which read none of them.
        let ownTerms = ignoringCacheControl && status == 200
        if requestHeaders.contains(.authorization)
            && (ownTerms || !(response.isPublic || response.sMaxAge != nil || response.mustRevalidate))
        {
            return .doNotStore("authorization")
        }
        // Vary: * can never be matched by a later request (§4.1).
        if responseHeaders.hasListElement(.vary, "*") { return .doNotStore("vary *") }
        // A shared cache must not hand one user's cookie to another; Larder does not store them.
        if responseHeaders.contains(.setCookie) { return .doNotStore("set-cookie") }
        // cache_first keeps a success on its own terms.
        if ownTerms { return .store }
        // §3: something must make it cacheable.
        let explicit =
            response.isPublic || response.maxAge != nil || response.sMaxAge != nil
            || responseHeaders.contains(.expires)
        guard explicit || Freshness.heuristicallyCacheable.contains(status) else {
            return .doNotStore("not cacheable")
        }
        return .store
    }
}

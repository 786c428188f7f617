import LarderHTTP

/// Whether a response fetched for one client may also be handed to other clients that asked
/// for the same thing at the same time (coalescing). The rules are a shared cache's, because
/// sharing a fill is serving one user's response to another.
public enum Shareability {
    /// Whether the response may go to every waiter at all.
    ///
    /// Not shareable: `no-store` or `private` (RFC 9111 §5.2.2.5, §5.2.2.7); `Set-Cookie` (one
    /// client's cookie must not reach another); a response to a request with `Authorization`
    /// unless §3.5 allows storing it; `Vary: *`; and, unless the route opted in with
    /// `dedup = "always"`, `no-cache` (which forbids reuse without validation).
    /// `responseCacheControl`, when given, is `responseHeaders`' Cache-Control already parsed.
    public static func allowsSharing(
        status: Int, responseHeaders: HTTPHeaders, fillRequest: HTTPHeaders, dedupAlways: Bool,
        responseCacheControl: CacheControl? = nil
    ) -> Bool {
        let response = responseCacheControl ?? CacheControl(responseHeaders)
        if response.noStore || response.isPrivate { return false }
        if responseHeaders.contains(.setCookie) { return false }
        if fillRequest.contains(.authorization), !(response.isPublic || response.sMaxAge != nil || response.mustRevalidate) {
            return false
        }
        if responseHeaders.hasListElement(.vary, "*") { return false }
        if !dedupAlways && response.noCache { return false }
        return true
    }

    /// Whether a waiter's request selects the same variant as the request the fill was made for
    /// (RFC 9111 §4.1): every header the response's `Vary` names must match.
    public static func sameVariant(responseHeaders: HTTPHeaders, fillRequest: HTTPHeaders, waiter: HTTPHeaders) -> Bool {
        let values = VaryMatcher.values(for: responseHeaders, request: fillRequest)
        return VaryMatcher.matches(vary: values, request: waiter)
    }
}

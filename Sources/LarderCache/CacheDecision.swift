import LarderConfig
import LarderHTTP

/// What to do with a request given what is stored (RFC 9111 §4 and the route policies).
public enum CacheDecision: Sendable, Equatable {
    /// Serve the stored response as a fresh hit.
    case serve
    /// Serve the stored response although it is stale; with `refresh`, also revalidate it in
    /// the background (stale-while-revalidate, cache_then_network).
    case serveStale(refresh: Bool)
    /// Ask the origin whether the stored response is still good (a conditional request).
    case revalidate
    /// Go to the origin without using the stored response; `reason` is the Cache-Status
    /// `fwd` value (uri-miss, stale, request).
    case forward(reason: ForwardReason)
    /// only-if-cached with nothing usable stored: 504 (§5.2.1.7).
    case unsatisfiable

    /// Decides for a GET or HEAD, given the best stored variant (or none).
    ///
    /// - policy `http`: §4.2 freshness with the request's max-age, min-fresh, max-stale and
    ///   no-cache, the response's no-cache and must-revalidate family, stale-while-revalidate.
    /// - `cache_first`: any stored copy younger than `ttl` (or fresh, without a ttl) is served,
    ///   whatever Cache-Control says on either side.
    /// - `cache_then_network`: any stored copy (younger than `ttl`, if set) is served at once and
    ///   refreshed in the background.
    /// - `stale_while_revalidate`: fresh copies are served; stale ones (younger than `ttl`, if
    ///   set) are served at once and refreshed in the background.
    /// - `revalidate`: a stored copy is validated with the origin before every use (a fresh one
    ///   too); only-if-cached gets a fresh copy as it is.
    /// - `offline`: anything stored is served, however stale.
    ///
    /// The route policies that serve on their own terms do so for successes only
    /// (``isSuccess(_:)``): any other stored answer follows `http`, fresh for at most
    /// `negativeTTL` (`cache.negative_ttl`), so no answer that failed is pinned; nor is one
    /// served stale while revalidated (only a client's max-stale, or stale-if-error, may).
    public static func decide(
        stored: StoredResponse?, request: RequestDirectives, policy routePolicy: CachePolicy, ttl: Double?,
        negativeTTL: Double, now: Double, offline: Bool = false
    ) -> CacheDecision {
        guard let stored else { return request.onlyIfCached || offline ? .unsatisfiable : .forward(reason: .uriMiss) }
        let age = stored.currentAge(now: now)
        let lifetime = self.lifetime(of: stored, negativeTTL: negativeTTL)
        let isFresh = lifetime > age
        if offline { return isFresh ? .serve : .serveStale(refresh: false) }
        let refreshOrForward: CacheDecision = stored.hasValidator ? .revalidate : .forward(reason: .stale)
        var policy = routePolicy
        if !isSuccess(stored.status), policy == .cacheFirst || policy == .cacheThenNetwork || policy == .staleWhileRevalidate {
            policy = .http
        }
        switch policy {
        case .networkOnly:
            return .forward(reason: .bypass)
        case .cacheFirst:
            if age < (ttl ?? lifetime) { return .serve }
            return request.onlyIfCached ? .unsatisfiable : refreshOrForward
        case .cacheThenNetwork:
            if let ttl, age >= ttl { return request.onlyIfCached ? .unsatisfiable : refreshOrForward }
            return .serveStale(refresh: true)
        case .staleWhileRevalidate:
            if isFresh { return .serve }
            if let ttl, age >= ttl { return request.onlyIfCached ? .unsatisfiable : refreshOrForward }
            return .serveStale(refresh: true)
        case .revalidate:
            if request.onlyIfCached { return isFresh ? .serve : .unsatisfiable }
            return refreshOrForward
        case .http:
            break
        }
        // §5.2.1.4: the client wants validation.
        if request.noCache { return stored.hasValidator ? .revalidate : .forward(reason: .request) }
        // §5.2.2.4: a no-cache response is validated before every reuse.
        if stored.directives.noCache { return refreshOrForward }
        var fresh = lifetime > age
        var clientForbidsThisAge = false
        if let maxAge = request.maxAge, age > Double(maxAge) {
            fresh = false  // §5.2.1.1
            clientForbidsThisAge = true
        }
        if let minFresh = request.minFresh, lifetime - age < Double(minFresh) {
            fresh = false  // §5.2.1.3
            clientForbidsThisAge = true
        }
        if fresh { return .serve }
        let staleness = age - lifetime
        if !stored.directives.forbidsStale && !clientForbidsThisAge {
            // §5.2.1.2: the client accepts this much staleness.
            if let maxStale = request.maxStale, staleness <= Double(maxStale) { return .serveStale(refresh: false) }
            // RFC 5861 §3: serve stale at once, revalidate in the background; never a failure,
            // which would answer everyone past negative_ttl, for as long as the window says,
            // whenever the refresh brings an answer that is not stored (no-store, Set-Cookie).
            if isSuccess(stored.status), let window = stored.directives.staleWhileRevalidate, staleness <= Double(window) {
                return .serveStale(refresh: true)
            }
        }
        if request.onlyIfCached { return .unsatisfiable }
        return refreshOrForward
    }

    /// Whether `status` is a success, the only answer the route policies keep on their own
    /// terms: 200, and 206 for a slice of one (every other 206 is never stored).
    @inline(__always)
    public static func isSuccess(_ status: Int) -> Bool { status == 200 || status == 206 }

    /// How long `stored` is fresh (RFC 9111 §4.2.1): its own lifetime, capped at `negativeTTL`
    /// unless it is a success (§4.2.1 lets a cache shorten it).
    @inline(__always)
    public static func lifetime(of stored: StoredResponse, negativeTTL: Double) -> Double {
        isSuccess(stored.status) ? stored.freshnessLifetime : min(stored.freshnessLifetime, negativeTTL)
    }

    /// Whether a stale `stored` may answer when the origin failed or answered 5xx
    /// (RFC 5861 §4, RFC 9111 §4.2.4): within the largest of the response's and request's
    /// stale-if-error and the configured window, and never past must-revalidate & co. A stored
    /// failure is stale once past `negativeTTL`, as ``decide(stored:request:policy:ttl:negativeTTL:now:offline:)`` judges it.
    public static func canServeStaleOnError(
        _ stored: StoredResponse, request: RequestDirectives, window: Double, negativeTTL: Double, now: Double
    ) -> Bool {
        if stored.directives.forbidsStale { return false }
        let allowed = max(Double(stored.directives.staleIfError ?? 0), Double(request.staleIfError ?? 0), window)
        return stored.currentAge(now: now) - lifetime(of: stored, negativeTTL: negativeTTL) <= allowed
    }
}

import LarderCache
import LarderConfig
import LarderUpstream

/// Options a fill is started with, beyond the request itself: set once where the fill is
/// made (``ClientConnection/fillOptions(for:url:validating:)`` and its callers), then only read.
/// A class: its twenty-odd fields are written once, in place, instead of being copied as a
/// whole at each hand-off from the builder to the fill.
///
/// State: made on the loop of the connection that starts the fill, read by the fill on it.
final class FillOptions {
    /// The stored response a conditional request was sent for (304 refreshes it).
    var validating: StoredResponse?
    /// A stale stored response to answer with if the origin fails (stale-if-error).
    var fallback: StoredResponse?
    /// The first client's request directives (no-store, stale-if-error).
    var requestDirectives = RequestDirectives.none
    var policy: CachePolicy = .http
    var ttl: Double?
    /// No client asked: a refresh in the background (stale-while-revalidate and friends).
    var background = false
    /// The first client asked for a range and the request went upstream without it.
    var rangeStripped = false
    /// A GET whose client's Range goes upstream as it came: the whole slices inside its 206
    /// may be stored (``SlicePlan/Reply/passedRange(of:contentLength:)``).
    var rangePassed = false
    /// How failed attempts are retried (the route's `[route.retry]`, else `[retry]`).
    var retry: RetryPolicy
    /// The route declares its requests safe to repeat whatever the method.
    var idempotentRoute = false
    /// The parent proxies to go through, best first (empty: direct).
    var parents: [ParentPlan.Parent] = []
    /// How long a parent that failed is skipped.
    var parentBackoff: Duration = .seconds(30)
    /// A slice fill: which slice its request's Range asks for, of slices this large.
    var slice: (index: Int, size: Int)?
    /// A slice fill of a walk that holds slices already: the object they belong to (its
    /// validator, ``SlicePlan/validator(of:)``, and length). A 200 of that same object keeps
    /// them (``StoreSink/Entry/keepsSlices``).
    var sliceObject: (validator: String, length: Int)?
    /// The route's key is not the URL (`key`, `ignore_query`): only a success is stored.
    var sharedKey = false
    /// The route's objects never change under their URL (and may be keyed across hosts): an
    /// unsafe request does not invalidate them.
    var immutableRoute = false
    /// The URL kept with the stored entry when the route's `key` is not the URL (listings
    /// show it), without the query parameters the route ignores (signatures).
    var storedURL: String?
    /// The digest the URL names, on a `digest` route: a 200's body must hash to it.
    var digest: (algorithm: DigestAlgorithm, expected: String)?
    /// The request carries the client's own preconditions or Range upstream
    /// (``ClientConnection/sendsOwnSelectors(_:)``): only a 200 is stored or shared.
    var ownSelectors = false
    /// A GET or HEAD that carries content upstream (``ClientConnection/sendsOwnContent(_:)``):
    /// its answer is neither stored nor shared.
    var ownContent = false

    init(retry: RetryPolicy = RetryPolicy(RetryConfig())) {
        self.retry = retry
    }

    /// The stale copy that may answer, at `now`, a failure of the fill's own (a transport
    /// error, a cut): stale-if-error from either side or `cache.stale_if_error`
    /// (RFC 5861 §4, RFC 9111 §4.2.4); nil when none may.
    func staleAnswerForError(settings: FillSettings, now: Double) -> StoredResponse? {
        guard let fallback,
            CacheDecision.canServeStaleOnError(
                fallback, request: requestDirectives, window: settings.staleIfError, negativeTTL: settings.negativeTTL, now: now)
        else { return nil }
        return fallback
    }
}

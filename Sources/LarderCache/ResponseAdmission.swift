import LarderConfig
import LarderHTTP

/// What an upstream response may become once its head is in, decided from the request, the
/// head and the clock alone; the fill carries it out. RFC 9111 §3 (storing), §4.3.4 (a 304
/// freshens the stored response), §4.3.5 (a HEAD freshens or outdates it), §4.4 (unsafe
/// methods invalidate), RFC 5861 §4 (stale-if-error).
public struct ResponseAdmission: Sendable, Equatable {
    /// What the fill knows about the request it sent.
    public struct Request: Sendable {
        public var method: HTTPMethod
        public var headers: HTTPHeaders
        public var policy: CachePolicy
        public var directives: RequestDirectives
        /// The stored response the request validates (conditional request), if any.
        public var validating: StoredResponse?
        /// A stored response that may answer if the origin fails (stale-if-error), if any.
        public var fallback: StoredResponse?
        /// The configured stale-if-error window, in seconds.
        public var staleIfErrorWindow: Double
        /// `dedup = "always"` on the route (waiters share by request body).
        public var dedupAlways: Bool
        /// `memory.max_object_bytes`: the memory tier takes bodies up to this size.
        public var maxMemoryObject: Int
        /// `cache.negative_ttl`: the longest an answer other than a success is stored fresh.
        public var negativeTTL: Double
        /// The key is not the URL (`key`, `ignore_query`): other URLs share the entry, so only a
        /// success may be stored there (an unsigned request's 404 must not answer signed ones).
        public var sharedKey: Bool
        /// A success is stored under the key (whole or as slices): the stored response the
        /// request validates or falls back on is one, or, when there is none, the tiers hold
        /// something for the key. Worked out for failures on `cache_first` only.
        public var holdsSuccess: Bool
        /// The request went upstream with the client's own preconditions or Range (not Larder's
        /// validators): a 304, 412, 416 or 206 answers that request alone.
        public var ownSelectors: Bool
        /// A GET or HEAD that went upstream with content (RFC 9110 §9.3.1: none has a defined
        /// meaning, but an origin may read it): whatever the status, the answer is that request's.
        public var ownContent: Bool
        /// The route checks bodies against the digest their URL names (a `digest` route): its
        /// key is shared by every host and trusts the digest, not the host that answered.
        public var contentAddressed: Bool
        /// When the request went upstream (wall-clock seconds; nil: the decision's `now`), for
        /// the response's corrected initial age (RFC 9111 §4.2.3).
        public var requestTime: Double?

        @inlinable
        public init(
            method: HTTPMethod, headers: HTTPHeaders, policy: CachePolicy, directives: RequestDirectives,
            validating: StoredResponse?, fallback: StoredResponse?, staleIfErrorWindow: Double, dedupAlways: Bool,
            maxMemoryObject: Int, negativeTTL: Double, sharedKey: Bool, holdsSuccess: Bool, ownSelectors: Bool = false,
            ownContent: Bool = false, contentAddressed: Bool = false, requestTime: Double? = nil
        ) {
            self.method = method
            self.headers = headers
            self.policy = policy
            self.directives = directives
            self.validating = validating
            self.fallback = fallback
            self.staleIfErrorWindow = staleIfErrorWindow
            self.dedupAlways = dedupAlways
            self.maxMemoryObject = maxMemoryObject
            self.negativeTTL = negativeTTL
            self.sharedKey = sharedKey
            self.holdsSuccess = holdsSuccess
            self.ownSelectors = ownSelectors
            self.ownContent = ownContent
            self.contentAddressed = contentAddressed
            self.requestTime = requestTime
        }

        /// What a failure must not displace: on `cache_first` (immutable objects) a stored
        /// success outlives any later answer that is not one.
        var keepsStoredSuccess: Bool {
            policy == .cacheFirst && holdsSuccess
        }
    }

    /// How the response is answered.
    public enum Verdict: Sendable, Equatable {
        /// A 304 to the validation: the stored response, freshened, answers every reader.
        case merge
        /// The origin erred (500-504) and the stored fallback may answer instead.
        case serveStale
        /// The response goes to the readers as it is.
        case forward
    }

    /// What the disk tier takes at the moment of the decision.
    public struct DiskTier: Sendable {
        /// `disk.max_object_bytes`.
        public var maxObjectBytes: Int64
        /// False while the tier refuses writes (after a write error).
        public var acceptingWrites: Bool

        public init(maxObjectBytes: Int64, acceptingWrites: Bool) {
            self.maxObjectBytes = maxObjectBytes
            self.acceptingWrites = acceptingWrites
        }
    }

    /// How the body is stored.
    public enum Storage: Sendable, Equatable {
        case none
        /// Kept whole by the fill and stored once complete: in the memory tier up to
        /// `memory.max_object_bytes`, and appended to the disk tier as a segment record. A body
        /// of unknown length starts so and is streamed once it outgrows ``wholeLimit(maxMemoryObject:disk:)``.
        case whole
        /// Too large to keep whole: streamed to a disk file of its own as it comes.
        case streamed
    }

    /// The most a fill keeps whole: what the memory tier takes, or what the disk tier would
    /// append as a segment record now (up to ``DiskCache/inlineLimit``, within its object limit,
    /// while it takes writes). Streaming a small body to a file of its own on the writer thread
    /// instead cost about as much CPU again as the whole miss.
    public static func wholeLimit(maxMemoryObject: Int, disk: DiskTier?) -> Int {
        guard let disk, disk.acceptingWrites else { return maxMemoryObject }
        return max(maxMemoryObject, Int(min(Int64(DiskCache.inlineLimit), disk.maxObjectBytes)))
    }

    public var verdict: Verdict
    /// An unsafe method succeeded: the target and same-origin Location/Content-Location go.
    public var invalidates: Bool
    /// A HEAD answered: the stored GET response is freshened (or dropped if it no longer matches).
    public var freshensStoredFromHead: Bool
    public var storage: Storage
    /// Other requests may receive this response (all but the first reader are released if not).
    public var shareable: Bool
    /// The freshness lifetime (seconds) the response is stored with.
    public var lifetime: Double
    /// The response's corrected initial age (RFC 9111 §4.2.3, seconds), worked out for a
    /// response that goes to readers as it is; the store takes it from here.
    public var initialAge = 0.0
    /// A failure answered while a success is kept (``Request/keepsStoredSuccess``) or under a
    /// shared key, or an answer to the client's own selectors (``Request/ownSelectors``): the
    /// stored response stays, neither replaced nor outdated. On a content-addressed route any
    /// answer that is not stored leaves the entry, whose body its digest pins.
    public var keepsStored = false
    /// A 304 that is one client's only for its `Set-Cookie`: the validation still holds for
    /// everyone, so the stored entry takes its freshness and validator fields (nothing else of
    /// it, ``StoredResponse/retimed(by:requestTime:responseTime:)``), and the entry so retimed
    /// answers the other readers of the fill.
    public var retimesStored = false
    /// The body must hash to the digest its URL names before it is stored or completes for any
    /// client (``Request/contentAddressed``): a 200 to a GET without a content coding.
    public var checksDigest = false

    /// Decides for `head` (hop-by-hop fields already removed), with the body's declared
    /// length (nil: unknown) and the disk tier as it is (nil: none), at `now` (wall-clock seconds).
    public static func decide(
        _ request: Request, head: ResponseHead, contentLength: Int?, cacheControl: CacheControl, disk: DiskTier?,
        now: Double
    ) -> ResponseAdmission {
        var admission = ResponseAdmission(
            verdict: .forward, invalidates: !request.method.isSafe && (200..<400).contains(head.status),
            freshensStoredFromHead: false, storage: .none, shareable: false, lifetime: 0)
        if request.validating != nil, head.status == 304 {
            admission.verdict = .merge
            // A 304 that is one client's (a cookie, `private`, `no-store`, an authorized
            // request's) answers that client alone and updates nothing stored: its fields would
            // reach every client the entry answers (RFC 9111 §3.2), as a HEAD's would.
            // A request's no-store leaves the entry as it is too (RFC 9111 §5.2.1.5), but the
            // validation still answers the others who joined it.
            admission.shareable = Shareability.allowsSharing(
                status: 304, responseHeaders: head.headers, fillRequest: request.headers, dedupAlways: true,
                responseCacheControl: cacheControl)
            admission.keepsStored = !admission.shareable || request.directives.noStore
            if !admission.shareable, !request.directives.noStore, head.headers.contains(.setCookie) {
                var withoutCookie = head.headers
                withoutCookie.remove(.setCookie)
                admission.retimesStored = Shareability.allowsSharing(
                    status: 304, responseHeaders: withoutCookie, fillRequest: request.headers, dedupAlways: true,
                    responseCacheControl: cacheControl)
            }
            return admission
        }
        admission.freshensStoredFromHead = request.method == .head && (request.validating ?? request.fallback) != nil
        if (500...504).contains(head.status), let fallback = request.fallback,
            CacheDecision.canServeStaleOnError(
                fallback, request: request.directives, window: request.staleIfErrorWindow, negativeTTL: request.negativeTTL, now: now)
        {
            admission.verdict = .serveStale
            return admission
        }
        admission.storage = storage(
            request, head: head, contentLength: contentLength, cacheControl: cacheControl,
            disk: disk, now: now, lifetime: &admission.lifetime)
        let ages = Freshness.initialAges(headers: head.headers, requestTime: request.requestTime ?? now, responseTime: now)
        admission.initialAge = ages.corrected
        admission.shareable =
            Shareability.allowsSharing(
                status: head.status, responseHeaders: head.headers, fillRequest: request.headers, dedupAlways: request.dedupAlways,
                responseCacheControl: cacheControl)
            && (request.dedupAlways
                || reusable(
                    request, head: head, cacheControl: cacheControl, lifetime: admission.lifetime, statedAge: ages.stated, now: now
                ))
        if !CacheDecision.isSuccess(head.status), request.sharedKey || request.keepsStoredSuccess {
            // The failure answers the request that met it, never the readers that joined it:
            // they may carry the signature this one lacked, or expect the stored success. Nor
            // does it outdate the entry: under a shared key it is one URL's answer (an unsigned
            // request's 403 says nothing of what the signed ones stored).
            admission.storage = .none
            admission.shareable = false
            admission.keepsStored = true
        }
        if request.ownSelectors, head.status != 200 {
            // An answer to the client's own preconditions or range (RFC 9110 §13.2.2, §14.2)
            // says nothing of the object for any other request: a 304 or 412 handed to a
            // request without them, or a 416 stored under the URL, would fail everyone else.
            admission.storage = .none
            admission.shareable = false
            admission.keepsStored = true
        }
        if head.status == 304 {
            // A 304 to no validation of Larder's (an origin that answers one to an unconditional
            // request) selects nothing stored: it answers its own request alone, never a reader
            // that joined without the client's preconditions or with others.
            admission.shareable = false
        }
        if request.ownContent {
            // Stored or shared, it would let one client choose what every other gets for the URL.
            admission.storage = .none
            admission.shareable = false
            admission.keepsStored = true
            admission.freshensStoredFromHead = false
        }
        if request.contentAddressed { addressByContent(&admission, request: request, head: head) }
        return admission
    }

    /// A content-addressed route's answer. A 200 to a GET is checked against the digest as it
    /// streams in; anything else the origin answers (another status, a HEAD's fields) describes
    /// that host only, so it neither is stored under the shared key, nor freshens what is, nor
    /// goes to the other readers (who may have asked another host). Nor is a content-coded 200
    /// stored or shared: its coding, unchecked, would reach clients of other hosts. Nor is it
    /// checked: the digest names the representation's bytes, not those of a coding of it
    /// (RFC 9110 §8.4), so a good answer to a client's Accept-Encoding would never match. And no
    /// answer outdates the stored entry: its body is pinned by the digest, and the answer (a 404,
    /// a coded or forged body) may come from another host than filled it.
    private static func addressByContent(_ admission: inout ResponseAdmission, request: Request, head: ResponseHead) {
        admission.checksDigest = request.method == .get && head.status == 200 && !head.headers.contains(.contentEncoding)
        if !admission.checksDigest {
            admission.storage = .none
            admission.shareable = false
            admission.freshensStoredFromHead = false
        }
        admission.keepsStored = true
    }

    /// Whether a shared cache could hand this response to another request without asking the
    /// origin (RFC 9111 §4.2): fresh for a while (`lifetime`, explicit or heuristic, longer than
    /// the age it states: a response stale on arrival answers no one else), or a success the
    /// route's policy keeps on its own terms; never on a `network_only` route. The time the
    /// fill waited for it does not count: a reader that joined waited as long, and a slow
    /// origin's short-lived answer is the one a stampede most needs shared. A
    /// reader that joined the fill is such another request: a response no cache could reuse (no
    /// freshness, `max-age=0`) goes to its own client only, and every other reader asks for its
    /// own. An origin that personalises a page by Cookie and says nothing of caching otherwise
    /// handed one user's page to everyone who joined it. The response decides, not the request
    /// the fill was made for: a client's `no-store` must not turn coalescing off for everyone.
    private static func reusable(
        _ request: Request, head: ResponseHead, cacheControl: CacheControl, lifetime: Double, statedAge: Double, now: Double
    ) -> Bool {
        guard request.policy != .networkOnly else { return false }
        let success = CacheDecision.isSuccess(head.status)
        var lifetime = lifetime
        if request.directives.noStore {
            // storage(_:) stopped before working it out.
            lifetime = Freshness.lifetime(status: head.status, headers: head.headers, cacheControl: cacheControl, responseTime: now)
            if !success { lifetime = min(lifetime, request.negativeTTL) }
        }
        if lifetime > statedAge { return true }
        // RFC 5861 §3: stale on arrival but within its stale-while-revalidate window, it is what
        // the cache serves the next request (refreshing it meanwhile), so the ones that joined.
        // Only with a lifetime of its own: a window alone says nothing of sharing, and a page
        // personalised by Cookie may carry one (review 81 N1).
        if success, lifetime > 0, let window = cacheControl.staleWhileRevalidate, statedAge - lifetime <= Double(window),
            !ResponseDirectives(cacheControl).forbidsStale
        {
            return true
        }
        return success && request.policy != .http && request.policy != .revalidate
    }

    /// Worth keeping: storable (RFC 9111 §3, or a success forced by `cache_first`) and fresh for
    /// a while, or revalidatable (ETag/Last-Modified), or a success kept by a route policy on its
    /// own terms. Any other answer is fresh for at most `negative_ttl`.
    private static func storage(
        _ request: Request, head: ResponseHead, contentLength: Int?, cacheControl: CacheControl, disk: DiskTier?,
        now: Double, lifetime: inout Double
    ) -> Storage {
        guard request.policy != .networkOnly, !request.directives.noStore else { return .none }
        let decision = Storability.decide(
            method: request.method, requestHeaders: request.headers, status: head.status, responseHeaders: head.headers,
            ignoringCacheControl: request.policy == .cacheFirst, responseCacheControl: cacheControl)
        let success = CacheDecision.isSuccess(head.status)
        lifetime = Freshness.lifetime(status: head.status, headers: head.headers, cacheControl: cacheControl, responseTime: now)
        if !success { lifetime = min(lifetime, request.negativeTTL) }
        let validatable = head.headers.contains(.etag) || head.headers.contains(.lastModified)
        // http and revalidate keep only what can be reused fresh or validated; the other
        // policies keep successes on their own terms.
        let ownTerms = success && request.policy != .http && request.policy != .revalidate
        guard decision.canStore, lifetime > 0 || validatable && success || ownTerms else { return .none }
        if (contentLength ?? 0) <= wholeLimit(maxMemoryObject: request.maxMemoryObject, disk: disk) { return .whole }
        return disk != nil ? .streamed : .none
    }
}

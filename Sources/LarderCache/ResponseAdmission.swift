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
        /// Bodies up to this size are kept whole in memory.
        public var maxMemoryObject: Int

        public init(
            method: HTTPMethod, headers: HTTPHeaders, policy: CachePolicy, directives: RequestDirectives,
            validating: StoredResponse?, fallback: StoredResponse?, staleIfErrorWindow: Double, dedupAlways: Bool,
            maxMemoryObject: Int
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

    /// Where the body is kept.
    public enum Storage: Sendable, Equatable {
        case none
        /// Whole in memory (and written to disk once complete).
        case memory
        /// Too large (or of unknown length beyond memory's limit): streamed to disk as it comes.
        case disk
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

    /// Decides for `head` (hop-by-hop fields already removed), with the body's declared
    /// length (nil: unknown), at `now` (wall-clock seconds).
    public static func decide(
        _ request: Request, head: ResponseHead, contentLength: Int?, cacheControl: CacheControl, diskAvailable: Bool,
        now: Double
    ) -> ResponseAdmission {
        var admission = ResponseAdmission(
            verdict: .forward, invalidates: !request.method.isSafe && (200..<400).contains(head.status),
            freshensStoredFromHead: false, storage: .none, shareable: false, lifetime: 0)
        if request.validating != nil, head.status == 304 {
            admission.verdict = .merge
            admission.shareable = true
            return admission
        }
        admission.freshensStoredFromHead = request.method == .head && (request.validating ?? request.fallback) != nil
        if (500...504).contains(head.status), let fallback = request.fallback,
            CacheDecision.canServeStaleOnError(fallback, request: request.directives, window: request.staleIfErrorWindow, now: now)
        {
            admission.verdict = .serveStale
            return admission
        }
        admission.storage = storage(
            request, head: head, contentLength: contentLength, cacheControl: cacheControl,
            diskAvailable: diskAvailable, now: now, lifetime: &admission.lifetime)
        admission.shareable = Shareability.allowsSharing(
            status: head.status, responseHeaders: head.headers, fillRequest: request.headers, dedupAlways: request.dedupAlways,
            responseCacheControl: cacheControl)
        return admission
    }

    /// Worth keeping: storable (RFC 9111 §3, or forced by `cache_first`) and fresh for a while,
    /// or revalidatable (ETag/Last-Modified), or kept by a route policy on its own terms.
    private static func storage(
        _ request: Request, head: ResponseHead, contentLength: Int?, cacheControl: CacheControl, diskAvailable: Bool,
        now: Double, lifetime: inout Double
    ) -> Storage {
        guard request.policy != .networkOnly, !request.directives.noStore else { return .none }
        let decision = Storability.decide(
            method: request.method, requestHeaders: request.headers, status: head.status, responseHeaders: head.headers,
            ignoringCacheControl: request.policy == .cacheFirst, responseCacheControl: cacheControl)
        lifetime = Freshness.lifetime(status: head.status, headers: head.headers, cacheControl: cacheControl, responseTime: now)
        let validatable = head.headers.contains("ETag") || head.headers.contains("Last-Modified")
        // http and revalidate keep only what can be reused fresh or validated; the other
        // policies keep responses on their own terms.
        let ownTerms = request.policy != .http && request.policy != .revalidate
        guard decision.canStore, lifetime > 0 || validatable || ownTerms else { return .none }
        if (contentLength ?? 0) <= request.maxMemoryObject { return .memory }
        return diskAvailable ? .disk : .none
    }
}

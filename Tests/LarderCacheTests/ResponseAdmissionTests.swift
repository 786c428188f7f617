import LarderConfig
import LarderHTTP
import Testing

@testable import LarderCache

/// The admission of a response head: merge, stale, forward; where it is stored; whether it
/// is shared; what it invalidates. Pure: the clock is a parameter.
@Suite(.timeLimit(.minutes(1))) struct ResponseAdmissionTests {
    let now = 1_764_000_000.0

    func request(
        _ method: HTTPMethod = .get, headers: HTTPHeaders = [:], policy: CachePolicy = .http,
        directives: RequestDirectives = .none, validating: StoredResponse? = nil, fallback: StoredResponse? = nil,
        sharedKey: Bool = false, holdsSuccess: Bool = false, ownSelectors: Bool = false,
        ownContent: Bool = false, contentAddressed: Bool = false
    ) -> ResponseAdmission.Request {
        ResponseAdmission.Request(
            method: method, headers: headers, policy: policy, directives: directives, validating: validating,
            fallback: fallback, staleIfErrorWindow: 3600, dedupAlways: false, maxMemoryObject: 1 << 20, negativeTTL: 30,
            sharedKey: sharedKey, holdsSuccess: holdsSuccess, ownSelectors: ownSelectors,
            ownContent: ownContent, contentAddressed: contentAddressed)
    }

    static let disk = ResponseAdmission.DiskTier(maxObjectBytes: 1 << 30, acceptingWrites: true)

    func decide(
        _ request: ResponseAdmission.Request, _ status: Int, _ headers: HTTPHeaders, length: Int? = 1000,
        disk: ResponseAdmission.DiskTier? = ResponseAdmissionTests.disk
    ) -> ResponseAdmission {
        let head = ResponseHead(status: status, headers: headers)
        return ResponseAdmission.decide(
            request, head: head, contentLength: length, cacheControl: CacheControl(headers), disk: disk, now: now)
    }

    @Test func aFreshResponseIsStoredWhereItsSizeFitsAndShared() {
        let fresh: HTTPHeaders = ["Cache-Control": "max-age=60"]
        let small = decide(request(), 200, fresh)
        #expect(small.verdict == .forward && small.storage == .whole && small.shareable && small.lifetime == 60)
        #expect(decide(request(), 200, fresh, length: 2 << 20).storage == .streamed)
        #expect(decide(request(), 200, fresh, length: 2 << 20, disk: nil).storage == .none)
        #expect(decide(request(), 200, fresh, length: nil).storage == .whole, "unknown length starts whole")
    }

    /// A body over the memory tier's limit is still kept whole when the disk tier would append
    /// it as a segment record now; otherwise it streams to a file, or is not stored at all.
    @Test func whatIsKeptWholeDependsOnWhatEachTierTakesNow() {
        let fresh: HTTPHeaders = ["Cache-Control": "max-age=60"]
        var small = request()
        small.maxMemoryObject = 1024
        let record = DiskCache.inlineLimit
        #expect(decide(small, 200, fresh, length: 1024).storage == .whole)
        #expect(decide(small, 200, fresh, length: 3000).storage == .whole, "a segment record")
        #expect(decide(small, 200, fresh, length: record).storage == .whole)
        #expect(decide(small, 200, fresh, length: record + 1).storage == .streamed)
        #expect(decide(small, 200, fresh, length: 3000, disk: nil).storage == .none, "no tier takes it")
        let refusing = ResponseAdmission.DiskTier(maxObjectBytes: 1 << 30, acceptingWrites: false)
        #expect(decide(small, 200, fresh, length: 3000, disk: refusing).storage == .streamed, "and the disk refuses it")
        let smallObjects = ResponseAdmission.DiskTier(maxObjectBytes: 2048, acceptingWrites: true)
        #expect(decide(small, 200, fresh, length: 2048, disk: smallObjects).storage == .whole)
        #expect(decide(small, 200, fresh, length: 3000, disk: smallObjects).storage == .streamed)
        #expect(ResponseAdmission.wholeLimit(maxMemoryObject: 1024, disk: nil) == 1024)
        #expect(ResponseAdmission.wholeLimit(maxMemoryObject: 1024, disk: Self.disk) == record)
        #expect(ResponseAdmission.wholeLimit(maxMemoryObject: 1024, disk: refusing) == 1024)
        #expect(ResponseAdmission.wholeLimit(maxMemoryObject: 1024, disk: smallObjects) == 2048)
        #expect(ResponseAdmission.wholeLimit(maxMemoryObject: 1 << 20, disk: Self.disk) == 1 << 20)
    }

    @Test func whatMayNotBeStoredIsNot() {
        #expect(decide(request(), 200, ["Cache-Control": "no-store"]).storage == .none)
        #expect(decide(request(policy: .networkOnly), 200, ["Cache-Control": "max-age=60"]).storage == .none)
        var noStore = RequestDirectives()
        noStore.noStore = true
        #expect(decide(request(directives: noStore), 200, ["Cache-Control": "max-age=60"]).storage == .none)
        #expect(decide(request(), 200, [:]).storage == .none, "no lifetime, no validator")
        #expect(decide(request(), 200, ["ETag": "\"a\""]).storage == .whole, "revalidatable")
        #expect(decide(request(policy: .cacheFirst), 200, ["Cache-Control": "max-age=0"]).storage == .whole, "cache_first keeps it")
        let mine = decide(request(), 200, ["Cache-Control": "private, max-age=60"])
        #expect(!mine.shareable)
    }

    /// Review 77 F2: a response stale on arrival (its Age, or its Date's distance, past its
    /// lifetime) is not one a shared cache could hand to another request (RFC 9111 §4.2), so
    /// not to a reader that joined its fill either. The time the fill waited for it does not
    /// count; the store's age does (§4.2.3).
    @Test func aResponseStaleOnArrivalIsNotShared() {
        let fresh = decide(request(), 200, ["Cache-Control": "max-age=60", "Age": "59"])
        #expect(fresh.shareable && fresh.initialAge == 59)
        #expect(!decide(request(), 200, ["Cache-Control": "max-age=60", "Age": "600"]).shareable)
        #expect(!decide(request(), 200, ["Cache-Control": "max-age=60", "Date": HTTPDate.format(Int(now) - 3600)]).shareable)
        #expect(decide(request(), 200, ["Cache-Control": "max-age=1", "Date": HTTPDate.format(Int(now))]).shareable)
        var slow = request()
        slow.requestTime = now - 5
        let waited = decide(slow, 200, ["Cache-Control": "max-age=3", "Date": HTTPDate.format(Int(now))])
        #expect(waited.shareable, "a slow origin's answer is shared")
        #expect(waited.initialAge == 5, "and stored with the age the wait gave it")
        #expect(decide(request(policy: .cacheFirst), 200, ["Cache-Control": "max-age=60", "Age": "600"]).shareable, "own terms")
        // Review 80 F4: within stale-while-revalidate the cache serves it to the next request
        // (RFC 5861 §3), so to the ones that joined; not where staleness is forbidden.
        #expect(decide(request(), 200, ["Cache-Control": "max-age=60, stale-while-revalidate=600", "Age": "600"]).shareable)
        #expect(!decide(request(), 200, ["Cache-Control": "max-age=60, stale-while-revalidate=60", "Age": "600"]).shareable)
        // Review 81 N1: a window with no lifetime of its own shares nothing.
        #expect(!decide(request(), 200, ["Cache-Control": "stale-while-revalidate=600"]).shareable)
        #expect(!decide(request(), 200, ["Cache-Control": "max-age=0, stale-while-revalidate=600"]).shareable)
        #expect(
            !decide(request(), 200, ["Cache-Control": "max-age=60, stale-while-revalidate=600, must-revalidate", "Age": "600"])
                .shareable)
    }

    @Test func a304ToAValidationMergesAndAnErrorWithAStaleCopyServesIt() {
        let stored = Fixtures.response("/x", headers: ["Cache-Control": "max-age=60", "ETag": "\"a\""], responseTime: now - 600)
        #expect(decide(request(validating: stored), 304, [:]).verdict == .merge)
        #expect(decide(request(), 304, [:]).verdict == .forward, "a 304 the fill did not ask for goes through")
        // Review 113: to its own request only, even fresh (an origin's 304 to a request
        // without preconditions would reach readers that asked for the object).
        #expect(!decide(request(), 304, ["Cache-Control": "max-age=60", "ETag": "\"b\""]).shareable)
        #expect(decide(request(fallback: stored), 503, [:]).verdict == .serveStale)
        #expect(decide(request(fallback: stored), 404, [:]).verdict == .forward)
        let gone = Fixtures.response("/x", responseTime: now - 100_000)
        #expect(decide(request(fallback: gone), 503, [:]).verdict == .forward, "beyond the stale-if-error window")
    }

    @Test func unsafeMethodsInvalidateAndHeadFreshens() {
        #expect(decide(request(.post), 201, [:]).invalidates)
        #expect(!decide(request(.post), 500, [:]).invalidates)
        #expect(!decide(request(), 200, [:]).invalidates)
        let stored = Fixtures.response("/x")
        #expect(decide(request(.head, fallback: stored), 200, [:]).freshensStoredFromHead)
        #expect(!decide(request(.head), 200, [:]).freshensStoredFromHead)
    }

    /// Immutable routes (cache_first) keep successes on their own terms; a 404 or 410 follows
    /// RFC 9111 §3 and §4.2 as on any route, fresh for at most `negative_ttl`, so a client asking
    /// for a version not yet published does not pin its failure.
    @Test func cacheFirstKeepsOnlySuccessesOnItsOwnTermsAndCapsFailuresAtTheNegativeTTL() {
        let immutable = request(policy: .cacheFirst)
        #expect(decide(immutable, 200, [:]).storage == .whole, "a success needs nothing to be kept")
        for status in [404, 410] {
            #expect(decide(immutable, status, [:]).storage == .none, "\(status) with no lifetime is not kept")
            #expect(decide(immutable, status, ["ETag": "\"a\""]).storage == .none, "nor kept to revalidate")
            let long = decide(immutable, status, ["Cache-Control": "max-age=31536000"])
            #expect(long.storage == .whole && long.lifetime == 30, "\(status) fresh for negative_ttl at most")
            #expect(decide(immutable, status, ["Cache-Control": "max-age=10"]).lifetime == 10, "or less, if it says so")
            #expect(decide(request(), status, ["Cache-Control": "max-age=31536000"]).lifetime == 30, "on every route")
            #expect(decide(request(policy: .cacheThenNetwork), status, [:]).storage == .none, "no route's own terms")
        }
        #expect(decide(immutable, 301, ["Cache-Control": "max-age=31536000"]).lifetime == 30, "a redirect is no success")
        #expect(decide(immutable, 500, [:]).storage == .none)
        #expect(decide(request(), 200, ["Cache-Control": "max-age=31536000"]).lifetime == 31_536_000, "successes uncapped")
        var none = immutable
        none.negativeTTL = 0
        #expect(decide(none, 404, ["Cache-Control": "max-age=60", "ETag": "\"a\""]).storage == .none, "0 keeps no failure")
    }

    /// RFC 9111 §5.2.2.5, §5.2.2.7: no route stores what the origin marked no-store or private.
    @Test func privateAndNoStoreAreNeverStoredOnAnyRoute() {
        for policy in CachePolicy.allCases {
            #expect(decide(request(policy: policy), 200, ["Cache-Control": "no-store"]).storage == .none, "\(policy)")
            #expect(decide(request(policy: policy), 200, ["Cache-Control": "private"]).storage == .none, "\(policy)")
            #expect(decide(request(policy: policy), 200, ["Cache-Control": "private, max-age=60"]).storage == .none, "\(policy)")
        }
    }

    /// Under `ignore_query` or a `key`, other URLs share the entry: an unsigned request's 404
    /// is neither stored nor handed to the readers that joined it (they may hold the signature).
    @Test func aFailureUnderASharedKeyIsNeitherStoredNorShared() {
        let shared = request(policy: .cacheFirst, sharedKey: true)
        let failed = decide(shared, 404, ["Cache-Control": "max-age=60"])
        #expect(failed.storage == .none && !failed.shareable && failed.keepsStored, "nor does it outdate the entry")
        #expect(decide(request(sharedKey: true), 403, [:]).keepsStored, "whatever the policy")
        #expect(decide(shared, 403, [:]).storage == .none)
        let success = decide(shared, 200, [:])
        #expect(success.storage == .whole && success.shareable)
    }

    /// A stored immutable success outlives any later failure for its URL: neither replaced
    /// (not stored) nor outdated (``ResponseAdmission/keepsStored``).
    @Test func aFailureNeverDisplacesAStoredImmutableSuccess() {
        let kept = decide(request(policy: .cacheFirst, holdsSuccess: true), 404, ["Cache-Control": "max-age=60"])
        #expect(kept.storage == .none && kept.keepsStored && !kept.shareable)
        let stale = decide(request(policy: .cacheFirst), 404, ["Cache-Control": "max-age=60"])
        #expect(stale.storage == .whole && !stale.keepsStored, "nothing good stored: the failure may be kept a while")
        let http = decide(request(holdsSuccess: true), 404, ["Cache-Control": "max-age=60"])
        #expect(http.storage == .whole && !http.keepsStored, "on an http route the origin's answer replaces it")
        #expect(!decide(request(policy: .cacheFirst, holdsSuccess: true), 200, [:]).keepsStored)
    }

    /// A request that went upstream with the client's own preconditions or Range: the 304,
    /// 412 or 416 the origin answers them with is that request's alone (not stored, not
    /// shared, nothing stored outdated by it); a 200 is the object's, as always.
    @Test func anAnswerToTheClientsOwnSelectorsIsThatRequestsAlone() {
        let own = request(headers: ["If-Match": "\"x\""], ownSelectors: true)
        for status in [304, 412, 416, 206] {
            let answer = decide(own, status, ["Cache-Control": "max-age=60"])
            #expect(answer.storage == .none && !answer.shareable && answer.keepsStored, "\(status)")
        }
        let full = decide(own, 200, ["Cache-Control": "max-age=60"])
        #expect(full.storage == .whole && full.shareable && !full.keepsStored)
        #expect(decide(request(), 412, ["Cache-Control": "max-age=60"]).storage == .whole, "without them, the HTTP rules")
    }

    /// A GET or HEAD that carried content upstream (RFC 9110 §9.3.1): whatever the origin
    /// answers may be the content's doing, so it is that request's alone, a HEAD's 200 included.
    @Test func anAnswerToAGetWithContentIsThatRequestsAlone() {
        let stored = Fixtures.response("/x", headers: ["Cache-Control": "max-age=60", "ETag": "\"x\""], responseTime: now - 600)
        for (method, status) in [(HTTPMethod.get, 200), (.get, 404), (.head, 200)] {
            let answer = decide(
                request(method, fallback: stored, ownContent: true), status, ["Cache-Control": "max-age=60", "ETag": "\"x\""])
            #expect(answer.storage == .none && !answer.shareable && answer.keepsStored, "\(method) \(status)")
            #expect(!answer.freshensStoredFromHead, "\(method) \(status)")
        }
        #expect(decide(request(), 200, ["Cache-Control": "max-age=60"]).storage == .whole, "without content, the HTTP rules")
    }

    /// A `digest` route's key is shared by every host: only a plain 200 to a GET is checked
    /// against the URL's digest (and then stored and shared); any other answer is that host's
    /// alone, and none outdates the entry the digest pins.
    @Test func onAContentAddressedRouteOnlyAPlainSuccessIsCheckedAndNoAnswerOutdatesTheEntry() {
        let addressed = request(sharedKey: true, contentAddressed: true)
        let fresh: HTTPHeaders = ["Cache-Control": "max-age=60"]
        let plain = decide(addressed, 200, fresh)
        #expect(plain.checksDigest && plain.storage == .whole && plain.shareable && plain.keepsStored)
        let coded = decide(addressed, 200, ["Cache-Control": "max-age=60", "Content-Encoding": "gzip"])
        #expect(!coded.checksDigest && coded.storage == .none && !coded.shareable && coded.keepsStored)
        let head = decide(request(.head, sharedKey: true, contentAddressed: true), 200, fresh)
        #expect(!head.checksDigest && head.storage == .none && !head.freshensStoredFromHead && head.keepsStored)
        for status in [404, 500, 304] {
            let answer = decide(addressed, status, fresh)
            #expect(!answer.checksDigest && answer.storage == .none && !answer.shareable && answer.keepsStored, "\(status)")
        }
        #expect(!decide(request(sharedKey: true), 200, fresh).checksDigest, "a route without a digest checks nothing")
    }
}

import LarderCache
import LarderConfig
import LarderHTTP
import Testing

/// The cache decision with an injected clock: a response stored at t=1000 with the given headers.
private func stored(_ headers: HTTPHeaders, at time: Double = 1000) -> StoredResponse {
    StoredResponse.make(
        key: Fixtures.key("/d"), status: 200, reason: "OK", headers: headers, body: .memory([1, 2, 3]),
        requestTime: time, responseTime: time, varyValues: [:])
}

private func decide(
    _ entry: StoredResponse?, at now: Double, request: HTTPHeaders = [:], policy: CachePolicy = .http, ttl: Double? = nil,
    negativeTTL: Double = 30, offline: Bool = false
) -> CacheDecision {
    CacheDecision.decide(
        stored: entry, request: RequestDirectives(request), policy: policy, ttl: ttl, negativeTTL: negativeTTL, now: now,
        offline: offline)
}

@Suite(.timeLimit(.minutes(1))) struct CacheDecisionTests {
    let fresh60 = stored(["Cache-Control": "max-age=60", "ETag": "\"a\""])
    let plain60 = stored(["Cache-Control": "max-age=60"])

    @Test func freshThenStaleAsTheClockAdvances() {
        #expect(decide(fresh60, at: 1059) == .serve)
        #expect(decide(fresh60, at: 1061) == .revalidate)
        #expect(decide(plain60, at: 1061) == .forward(reason: .stale))
        #expect(decide(nil, at: 1000) == .forward(reason: .uriMiss))
    }

    @Test func requestMaxAgeMinFreshAndMaxStale() {
        #expect(decide(fresh60, at: 1030, request: ["Cache-Control": "max-age=20"]) == .revalidate)
        #expect(decide(fresh60, at: 1030, request: ["Cache-Control": "max-age=40"]) == .serve)
        #expect(decide(fresh60, at: 1030, request: ["Cache-Control": "min-fresh=40"]) == .revalidate)
        #expect(decide(fresh60, at: 1030, request: ["Cache-Control": "min-fresh=20"]) == .serve)
        #expect(decide(fresh60, at: 1090, request: ["Cache-Control": "max-stale=40"]) == .serveStale(refresh: false))
        #expect(decide(fresh60, at: 1090, request: ["Cache-Control": "max-stale=20"]) == .revalidate)
        #expect(decide(fresh60, at: 9999, request: ["Cache-Control": "max-stale"]) == .serveStale(refresh: false))
    }

    @Test func mustRevalidateFamilyForbidsStale() {
        for directive in ["must-revalidate", "proxy-revalidate", "s-maxage=60"] {
            let entry = stored(["Cache-Control": "max-age=60, \(directive)", "ETag": "\"a\""])
            #expect(decide(entry, at: 1090, request: ["Cache-Control": "max-stale"]) == .revalidate, "\(directive)")
            #expect(!CacheDecision.canServeStaleOnError(entry, request: .none, window: 3600, negativeTTL: 30, now: 1090), "\(directive)")
        }
    }

    @Test func staleWhileRevalidateWindow() {
        let entry = stored(["Cache-Control": "max-age=60, stale-while-revalidate=30", "ETag": "\"a\""])
        #expect(decide(entry, at: 1080) == .serveStale(refresh: true))
        #expect(decide(entry, at: 1100) == .revalidate)
    }

    @Test func noCacheOnEitherSideMeansValidation() {
        #expect(decide(fresh60, at: 1001, request: ["Cache-Control": "no-cache"]) == .revalidate)
        #expect(decide(plain60, at: 1001, request: ["Pragma": "no-cache"]) == .forward(reason: .request))
        #expect(decide(plain60, at: 1001, request: ["Pragma": "x, No-Cache"]) == .forward(reason: .request))
        #expect(decide(plain60, at: 1001, request: ["Pragma": "no-cache-x"]) != .forward(reason: .request))
        let noCache = stored(["Cache-Control": "no-cache, max-age=60", "ETag": "\"a\""])
        #expect(decide(noCache, at: 1001) == .revalidate)
    }

    @Test func onlyIfCached() {
        #expect(decide(nil, at: 1000, request: ["Cache-Control": "only-if-cached"]) == .unsatisfiable)
        #expect(decide(fresh60, at: 1090, request: ["Cache-Control": "only-if-cached"]) == .unsatisfiable)
        #expect(decide(fresh60, at: 1010, request: ["Cache-Control": "only-if-cached"]) == .serve)
    }

    @Test func staleIfErrorWindows() {
        let entry = stored(["Cache-Control": "max-age=60, stale-if-error=100"])
        #expect(CacheDecision.canServeStaleOnError(entry, request: .none, window: 0, negativeTTL: 30, now: 1150))
        #expect(!CacheDecision.canServeStaleOnError(entry, request: .none, window: 0, negativeTTL: 30, now: 1200))
        #expect(CacheDecision.canServeStaleOnError(entry, request: .none, window: 3600, negativeTTL: 30, now: 1200))
        let request = RequestDirectives(["Cache-Control": "stale-if-error=500"])
        #expect(CacheDecision.canServeStaleOnError(plain60, request: request, window: 0, negativeTTL: 30, now: 1500))
    }

    /// The route policies serve only successes on their own terms: any other stored answer is
    /// judged by §4.2, fresh for at most `negative_ttl`, whatever the route's ttl.
    @Test func storedFailuresFollowHTTPWithinTheNegativeTTLOnEveryPolicy() {
        func failure(_ status: Int, _ headers: HTTPHeaders) -> StoredResponse {
            StoredResponse.make(
                key: Fixtures.key("/d"), status: status, reason: "", headers: headers, body: .memory([]), requestTime: 1000,
                responseTime: 1000, varyValues: [:])
        }
        let tenYears = 10 * 365 * 86_400.0
        for status in [404, 410, 301] {
            let long = failure(status, ["Cache-Control": "max-age=31536000"])
            #expect(decide(long, at: 1029, policy: .cacheFirst, ttl: tenYears) == .serve, "\(status)")
            #expect(decide(long, at: 1031, policy: .cacheFirst, ttl: tenYears) == .forward(reason: .stale), "\(status)")
            #expect(decide(long, at: 1031, policy: .http) == .forward(reason: .stale))
            #expect(decide(long, at: 1031, policy: .cacheThenNetwork) == .forward(reason: .stale))
            #expect(decide(long, at: 1031, policy: .staleWhileRevalidate, ttl: tenYears) == .forward(reason: .stale))
            #expect(decide(long, at: 1005, policy: .cacheFirst, ttl: 2, negativeTTL: 10) == .serve, "the route ttl is not its")
            let short = failure(status, ["Cache-Control": "max-age=5", "ETag": "\"a\""])
            #expect(decide(short, at: 1006, policy: .cacheFirst, ttl: tenYears) == .revalidate, "its own lifetime if shorter")
            #expect(
                decide(short, at: 1001, request: ["Cache-Control": "no-cache"], policy: .cacheFirst, ttl: tenYears) == .revalidate,
                "and the client's no-cache")
        }
        let window = failure(404, ["Cache-Control": "max-age=31536000, stale-while-revalidate=31536000"])
        #expect(decide(window, at: 1031) == .forward(reason: .stale), "no stale-while-revalidate for a failure")
        #expect(
            decide(window, at: 1031, request: ["Cache-Control": "max-stale"]) == .serveStale(refresh: false), "max-stale is the client's")
        let year = failure(404, ["Cache-Control": "max-age=31536000"])
        #expect(CacheDecision.canServeStaleOnError(year, request: .none, window: 60, negativeTTL: 30, now: 1090))
        #expect(
            !CacheDecision.canServeStaleOnError(year, request: .none, window: 60, negativeTTL: 30, now: 1100),
            "a stored failure is stale past negative_ttl, and stale-if-error counts from there")
        let success = stored(["Cache-Control": "max-age=0"])
        #expect(decide(success, at: 1000 + tenYears - 1, policy: .cacheFirst, ttl: tenYears) == .serve, "a success is pinned")
        #expect(CacheDecision.lifetime(of: success, negativeTTL: 30) == 0)
        #expect(CacheDecision.lifetime(of: stored(["Cache-Control": "max-age=600"]), negativeTTL: 30) == 600)
    }

    @Test func routePolicies() {
        let noStore = stored(["Cache-Control": "no-store"])
        #expect(decide(noStore, at: 1100, policy: .cacheFirst, ttl: 200) == .serve)
        #expect(decide(noStore, at: 1300, policy: .cacheFirst, ttl: 200) == .forward(reason: .stale))
        #expect(decide(fresh60, at: 1010, policy: .cacheThenNetwork) == .serveStale(refresh: true))
        #expect(decide(fresh60, at: 1010, policy: .staleWhileRevalidate) == .serve)
        #expect(decide(fresh60, at: 5000, policy: .staleWhileRevalidate) == .serveStale(refresh: true))
        #expect(decide(fresh60, at: 1010, policy: .networkOnly) == .forward(reason: .bypass))
        #expect(decide(fresh60, at: 99_999, offline: true) == .serveStale(refresh: false))
        #expect(decide(nil, at: 1000, offline: true) == .unsatisfiable)
    }

    @Test func notModifiedRefreshesHeadersAndAge() {
        let entry = stored(["Cache-Control": "max-age=60", "ETag": "\"a\"", "X-V": "1", "Content-Length": "3"])
        let updated = entry.freshened(
            by: ["Cache-Control": "max-age=600", "X-V": "2", "Content-Length": "0"], requestTime: 2000, responseTime: 2000)
        #expect(updated.headers["X-V"] == "2")
        #expect(updated.headers["Content-Length"] == "3", "framing fields are not taken from the 304")
        #expect(updated.freshnessLifetime == 600)
        #expect(updated.isFresh(now: 2500))
        #expect(updated.bodyLength == 3)
    }

    /// Review 76 F3: a 304 (or a HEAD's 200) that named another Content-Type or
    /// Content-Encoding relabelled the stored bytes for every client after.
    @Test func aValidationDoesNotRelabelTheStoredBytes() {
        let entry = stored(["Cache-Control": "max-age=60", "ETag": "\"a\"", "Content-Type": "text/plain", "Content-Length": "3"])
        let updated = entry.freshened(
            by: ["Content-Type": "text/html", "Content-Encoding": "gzip", "Link": "</s.css>; rel=preload"], requestTime: 2000,
            responseTime: 2000)
        #expect(updated.headers["Content-Type"] == "text/plain")
        #expect(updated.headers["Content-Encoding"] == nil)
        #expect(updated.headers["Link"] == "</s.css>; rel=preload", "other fields are updated (RFC 9111 §3.2)")
    }
}

@Suite(.timeLimit(.minutes(1))) struct PreconditionAndRangeTests {
    let headers: HTTPHeaders = ["ETag": "\"x\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"]

    @Test func conditionalRequests() {
        #expect(Preconditions.notModified(request: ["If-None-Match": "W/\"x\""], status: 200, responseHeaders: headers))
        #expect(!Preconditions.notModified(request: ["If-None-Match": "\"y\""], status: 200, responseHeaders: headers))
        #expect(
            Preconditions.notModified(
                request: ["If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"], status: 200, responseHeaders: headers))
        #expect(
            !Preconditions.notModified(
                request: ["If-Modified-Since": "Sat, 05 Nov 1994 08:49:37 GMT"], status: 200, responseHeaders: headers))
        #expect(!Preconditions.notModified(request: ["If-None-Match": "\"x\""], status: 404, responseHeaders: headers))
    }

    @Test func ranges() {
        func resolve(_ range: String, _ extra: [(String, String)] = []) -> RangeRequest.Resolution {
            RangeRequest.resolve(request: HTTPHeaders([("Range", range)] + extra), length: 100, responseHeaders: headers)
        }
        #expect(resolve("bytes=0-9") == .partial(first: 0, last: 9))
        #expect(resolve("bytes=-10") == .partial(first: 90, last: 99))
        #expect(resolve("bytes=95-") == .partial(first: 95, last: 99))
        #expect(resolve("bytes=95-500") == .partial(first: 95, last: 99))
        #expect(resolve("bytes=100-") == .unsatisfiable)
        #expect(resolve("bytes=-0") == .unsatisfiable)
        #expect(resolve("bytes=5-1") == .full)
        #expect(resolve("bytes=0-1,5-6") == .full)
        #expect(resolve("bytes=0-9", [("If-Range", "\"x\"")]) == .partial(first: 0, last: 9))
        #expect(resolve("bytes=0-9", [("If-Range", "\"z\"")]) == .full)
        #expect(resolve("bytes=0-9", [("If-Range", "Sun, 06 Nov 1994 08:49:37 GMT")]) == .partial(first: 0, last: 9))
    }
}

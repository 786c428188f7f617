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
        directives: RequestDirectives = .none, validating: StoredResponse? = nil, fallback: StoredResponse? = nil
    ) -> ResponseAdmission.Request {
        ResponseAdmission.Request(
            method: method, headers: headers, policy: policy, directives: directives, validating: validating,
            fallback: fallback, staleIfErrorWindow: 3600, dedupAlways: false, maxMemoryObject: 1 << 20)
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
        #expect(decide(request(policy: .cacheFirst), 200, ["Cache-Control": "no-store"]).storage == .whole, "cache_first keeps it")
        let mine = decide(request(), 200, ["Cache-Control": "private, max-age=60"])
        #expect(!mine.shareable)
    }

    @Test func a304ToAValidationMergesAndAnErrorWithAStaleCopyServesIt() {
        let stored = Fixtures.response("/x", headers: ["Cache-Control": "max-age=60", "ETag": "\"a\""], responseTime: now - 600)
        #expect(decide(request(validating: stored), 304, [:]).verdict == .merge)
        #expect(decide(request(), 304, [:]).verdict == .forward, "a 304 the fill did not ask for goes through")
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
}

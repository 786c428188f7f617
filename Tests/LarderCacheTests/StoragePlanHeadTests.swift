import LarderConfig
import LarderHTTP
import Testing

@testable import LarderCache

/// A HEAD's 200 that matches the stored GET updates it only with fields a shared cache could
/// store for every client (RFC 9111 §3.2, §3.5, §4.3.5); any other such answer leaves the
/// stored response as it is, neither updated nor outdated.
@Suite(.timeLimit(.minutes(1))) struct StoragePlanHeadTests {
    static let now = 1_764_000_000.0
    static let tagged: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"a\""]
    static let stored = Fixtures.response("/x", bodySize: 100, headers: tagged, responseTime: now - 600)

    struct Row: Sendable {
        let name: String
        var requestHeaders: HTTPHeaders = [:]
        var headers: HTTPHeaders = StoragePlanHeadTests.tagged
        var announced: Int? = 100
        let expected: StoragePlan.Action
        /// The fill must leave the stored response (no outdating behind the plan's back).
        var keepsStored = false
    }

    static let rows: [Row] = [
        Row(name: "a plain matching answer updates", expected: .updateFromHead),
        Row(
            name: "a Set-Cookie answer does not update", headers: ["ETag": "\"a\"", "Set-Cookie": "session=alice"],
            expected: .skip(.rules), keepsStored: true),
        Row(
            name: "a private answer does not update", headers: ["ETag": "\"a\"", "Cache-Control": "private, max-age=60"],
            expected: .skip(.rules), keepsStored: true),
        Row(
            name: "a no-store answer does not update", headers: ["ETag": "\"a\"", "Cache-Control": "no-store"], expected: .skip(.rules),
            keepsStored: true),
        Row(
            name: "an answer to an authorized request does not update", requestHeaders: ["Authorization": "Basic YTpi"],
            expected: .skip(.rules), keepsStored: true),
        Row(
            name: "a public answer to an authorized request updates", requestHeaders: ["Authorization": "Basic YTpi"],
            headers: ["ETag": "\"a\"", "Cache-Control": "public, max-age=60"], expected: .updateFromHead),
        Row(
            name: "a request's no-store does not update", requestHeaders: ["Cache-Control": "no-store"], expected: .skip(.rules),
            keepsStored: true),
        Row(
            name: "a no-cache answer updates (validated before each reuse)", headers: ["ETag": "\"a\"", "Cache-Control": "no-cache"],
            expected: .updateFromHead),
        Row(
            name: "a mismatching answer with a cookie still outdates", headers: ["ETag": "\"b\"", "Set-Cookie": "session=alice"],
            expected: .outdateFromHead),
    ]

    @Test(arguments: rows.indices) func eachCase(_ index: Int) {
        let row = Self.rows[index]
        let request = ResponseAdmission.Request(
            method: .head, headers: row.requestHeaders, policy: .http, directives: RequestDirectives(row.requestHeaders),
            validating: Self.stored, fallback: nil, staleIfErrorWindow: 3600, dedupAlways: false, maxMemoryObject: 1 << 20,
            negativeTTL: 30, sharedKey: false, holdsSuccess: false)
        let answer = StoragePlan.Answer(
            head: ResponseHead(status: 200, headers: row.headers), cacheControl: CacheControl(row.headers), contentLength: nil,
            announcedLength: row.announced)
        let plan = StoragePlan.decide(
            request, answer: answer, slicing: StoragePlan.Slicing(), disk: nil, now: Self.now, admitted: { _ in true })
        #expect(plan.action == row.expected, "\(row.name)")
        #expect(plan.admission.keepsStored == row.keepsStored, "\(row.name): keeps the stored response")
        #expect(!plan.stores, "\(row.name): a HEAD stores no body")
    }

    /// A 304's or HEAD's update never gives the stored response a cookie (RFC 9111 §3.2 as a
    /// shared cache that stores no Set-Cookie applies it).
    @Test func anUpdateNeverStoresACookie() {
        let updated = Self.stored.freshened(
            by: ["ETag": "\"a\"", "Set-Cookie": "session=alice", "X-V": "2"], requestTime: Self.now, responseTime: Self.now)
        #expect(updated.headers["X-V"] == "2")
        #expect(!updated.headers.contains("Set-Cookie"))
    }
}

import LarderConfig
import LarderHTTP
import Testing

@testable import LarderCache

/// Every case of the storage plan, one row each: what the fill asked, what the origin
/// answered, the tiers as they are, the doorkeeper's answer, and what becomes of the answer.
@Suite(.timeLimit(.minutes(1))) struct StoragePlanTests {
    static let now = 1_764_000_000.0
    static let disk = ResponseAdmission.DiskTier(maxObjectBytes: 1 << 30, acceptingWrites: true)
    static let fresh: HTTPHeaders = ["Cache-Control": "max-age=60"]
    static let tagged: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"a\""]
    static let stored = Fixtures.response("/x", bodySize: 100, headers: tagged, responseTime: now - 600)
    static let untagged = Fixtures.response("/x", bodySize: 100, headers: fresh, responseTime: now - 600)
    static let missing = StoredResponse(
        key: Fixtures.key("/x"), status: 404, reason: "Not Found", headers: fresh, body: .memory([]), requestTime: now - 600,
        responseTime: now - 600, varyValues: [:], freshnessLifetime: 60, correctedInitialAge: 0)
    static let slice = ContentRange(first: 1 << 20, last: (2 << 20) - 1, length: 10 << 20)
    /// Another range than the slice asked for, holding slices 1 and 2 whole.
    static let capped = ContentRange(first: 512 << 10, last: (3 << 20) + 99, length: 10 << 20)
    /// One that holds the object's last slice, which ends at the object's end.
    static let tail = ContentRange(first: (8 << 20) + 5, last: (10 << 20) - 1, length: 10 << 20)
    static let withinOne = ContentRange(first: (1 << 20) + 100, last: (1 << 20) + 199, length: 10 << 20)

    struct Row: Sendable {
        let name: String
        var method: HTTPMethod = .get
        var policy: CachePolicy = .http
        var validating: StoredResponse? = nil
        var fallback: StoredResponse? = nil
        var contentAddressed = false
        var status = 200
        var headers: HTTPHeaders = StoragePlanTests.fresh
        var length: Int? = 1000
        var announced: Int? = nil
        var sliceRange: ContentRange? = nil
        var slicing = StoragePlan.Slicing(sliceFill: false, size: 1 << 20)
        var disk: ResponseAdmission.DiskTier? = StoragePlanTests.disk
        var admitted = true
        /// The request sent the client's own Range (or preconditions) upstream.
        var ownSelectors = false
        let expected: StoragePlan.Action
        /// Whether the doorkeeper is asked (only about a new entry that would be stored).
        var asksDoorkeeper = false
        /// Whether the stored response stays as it is, where the row says.
        var keepsStored: Bool? = nil
    }

    static let rangeFill = StoragePlan.Slicing(sliceFill: false, size: 1 << 20, rangeFill: true)

    static let rows: [Row] = [
        Row(name: "a small fresh 200 is kept whole", expected: .whole, asksDoorkeeper: true),
        Row(name: "unknown length starts whole", length: nil, expected: .whole, asksDoorkeeper: true),
        Row(name: "a large one streams to disk", length: 5 << 20, expected: .streamed, asksDoorkeeper: true),
        Row(name: "a large one without a disk tier is not stored", length: 2 << 20, disk: nil, expected: .skip(.rules)),
        Row(name: "no-store is not stored", headers: ["Cache-Control": "no-store"], expected: .skip(.rules)),
        Row(name: "network_only stores nothing", policy: .networkOnly, expected: .skip(.rules)),
        Row(name: "the doorkeeper defers a new entry", admitted: false, expected: .skip(.deferred), asksDoorkeeper: true),
        Row(
            name: "a validation's new answer replaces the stored one unasked", validating: stored, headers: tagged, admitted: false,
            expected: .whole),
        Row(name: "a 304 to the validation merges", validating: stored, status: 304, headers: tagged, expected: .merge),
        Row(name: "a 503 with a stale copy serves it", fallback: stored, status: 503, headers: [:], expected: .serveStale),
        Row(name: "a 503 without one is not stored", status: 503, headers: [:], expected: .skip(.rules)),
        Row(
            name: "a whole 200 larger than a slice with a validator goes as slices", headers: tagged, length: 3 << 20,
            expected: .slices, asksDoorkeeper: true),
        Row(
            name: "a weak validator does not combine slices", headers: ["Cache-Control": "max-age=60", "ETag": "W/\"a\""],
            length: 3 << 20, expected: .streamed, asksDoorkeeper: true),
        Row(
            name: "a digest route never slices", contentAddressed: true, headers: tagged, length: 3 << 20, expected: .streamed,
            asksDoorkeeper: true),
        Row(
            name: "no slice size, no slices", headers: tagged, length: 3 << 20, slicing: StoragePlan.Slicing(), expected: .streamed,
            asksDoorkeeper: true),
        Row(
            name: "an object over disk.max_object_bytes is not sliced", headers: tagged, length: 3 << 20,
            disk: ResponseAdmission.DiskTier(maxObjectBytes: 2 << 20, acceptingWrites: true), expected: .streamed,
            asksDoorkeeper: true),
        Row(
            name: "a slice fill's exact slice is stored as that slice", status: 206, headers: tagged, length: 1 << 20,
            sliceRange: slice, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), admitted: false,
            expected: .slice(slice)),
        Row(
            name: "a slice without a strong validator is refused", status: 206, length: 1 << 20, sliceRange: slice,
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .skip(.sliceRefused)),
        Row(
            name: "a slice of an object over disk.max_object_bytes is refused", status: 206, headers: tagged, length: 1 << 20,
            sliceRange: slice, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20),
            disk: ResponseAdmission.DiskTier(maxObjectBytes: 5 << 20, acceptingWrites: true), expected: .skip(.sliceRefused)),
        Row(
            name: "a slice without a disk tier is refused", status: 206, headers: tagged, length: 1 << 20, sliceRange: slice,
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), disk: nil, expected: .skip(.sliceRefused)),
        Row(
            name: "a slice fill's other range stores the whole slices inside it", status: 206, headers: tagged,
            length: capped.last - capped.first + 1, sliceRange: capped, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20),
            expected: .slicesWithin(capped)),
        Row(
            name: "a range to the object's end holds its last slice whole", status: 206, headers: tagged,
            length: tail.last - tail.first + 1, sliceRange: tail, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20),
            expected: .slicesWithin(tail)),
        Row(
            name: "a part of one slice begins or continues that slice", status: 206, headers: tagged, length: 100,
            sliceRange: withinOne, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .slicePart(withinOne)),
        Row(
            name: "a part of one slice without a strong validator is refused", status: 206, length: 100, sliceRange: withinOne,
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .skip(.sliceRefused)),
        Row(
            name: "a range across two slices holding neither whole is not the object's", status: 206, headers: tagged,
            length: 1 << 20, sliceRange: ContentRange(first: (1 << 20) + 100, last: (2 << 20) + 99, length: 10 << 20),
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .skip(.otherRange)),
        Row(
            name: "another range without a strong validator is refused", status: 206, length: capped.last - capped.first + 1,
            sliceRange: capped, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .skip(.sliceRefused)),
        Row(
            name: "another range of an object over disk.max_object_bytes is refused", status: 206, headers: tagged,
            length: capped.last - capped.first + 1, sliceRange: capped, slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20),
            disk: ResponseAdmission.DiskTier(maxObjectBytes: 5 << 20, acceptingWrites: true), expected: .skip(.sliceRefused)),
        Row(
            name: "a slice request's other answer is not the object's", status: 416, headers: tagged, length: 0,
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .skip(.otherRange)),
        Row(
            name: "a slice request's 200 is the whole object", headers: tagged, length: 3 << 20,
            slicing: StoragePlan.Slicing(sliceFill: true, size: 1 << 20), expected: .slices),
        Row(
            name: "a HEAD matching the stored GET updates it", method: .head, validating: stored, headers: tagged, length: nil,
            announced: 100, expected: .updateFromHead),
        Row(
            name: "a HEAD on a stale entry without validators, of the same length, updates it", method: .head, fallback: untagged,
            length: nil, announced: 100, expected: .updateFromHead),
        Row(
            name: "a HEAD without a length matches on its validators", method: .head, validating: stored, headers: tagged,
            length: nil, expected: .updateFromHead),
        Row(
            name: "a HEAD with another ETag outdates it", method: .head, validating: stored,
            headers: ["Cache-Control": "max-age=60", "ETag": "\"b\""], length: nil, announced: 100, expected: .outdateFromHead),
        Row(
            name: "a HEAD with another length outdates it", method: .head, validating: stored, headers: tagged, length: nil,
            announced: 101, expected: .outdateFromHead),
        Row(
            name: "a HEAD without the stored ETag outdates it", method: .head, validating: stored, length: nil, announced: 100,
            expected: .outdateFromHead),
        Row(
            name: "a HEAD with an ETag the stored one lacks outdates it", method: .head, fallback: untagged, headers: tagged,
            length: nil, announced: 100, expected: .outdateFromHead),
        Row(
            name: "a HEAD's 200 does not match a stored 404", method: .head, fallback: missing, length: nil, announced: 0,
            expected: .outdateFromHead),
        Row(name: "a HEAD's 404 leaves it to the fill", method: .head, fallback: stored, status: 404, length: nil, expected: .skip(.rules)),
        Row(name: "a HEAD with nothing stored stores nothing", method: .head, length: nil, announced: 100, expected: .skip(.rules)),
        Row(
            name: "a HEAD on a digest route updates nothing", method: .head, fallback: stored, contentAddressed: true,
            headers: tagged, length: nil, announced: 100, expected: .skip(.rules)),
        Row(name: "a POST's answer is not stored", method: .post, status: 201, expected: .skip(.rules)),
        Row(
            name: "a 206 to the client's own Range keeps the whole slices inside it", validating: stored, status: 206,
            headers: tagged, length: capped.last - capped.first + 1, sliceRange: capped, slicing: rangeFill, admitted: false,
            ownSelectors: true, expected: .slicesWithin(capped), keepsStored: true),
        Row(
            name: "a 206 to the client's own Range that is one slice keeps that slice", status: 206, headers: tagged,
            length: 1 << 20, sliceRange: slice, slicing: rangeFill, ownSelectors: true, expected: .slicesWithin(slice)),
        Row(
            name: "a 206 to the client's own Range inside one slice keeps nothing", validating: stored, status: 206,
            headers: tagged, length: 100, sliceRange: withinOne, slicing: rangeFill, ownSelectors: true,
            expected: .skip(.otherRange), keepsStored: true),
        Row(
            name: "a 206 to the client's own Range without a strong validator keeps nothing", validating: stored, status: 206,
            length: capped.last - capped.first + 1, sliceRange: capped, slicing: rangeFill, ownSelectors: true,
            expected: .skip(.sliceRefused), keepsStored: true),
        Row(
            name: "a 206 to the client's own Range without a disk tier keeps nothing", status: 206, headers: tagged,
            length: 1 << 20, sliceRange: capped, slicing: rangeFill, disk: nil, ownSelectors: true,
            expected: .skip(.sliceRefused)),
        Row(
            name: "a 206 to the client's own Range claiming a huge length keeps nothing", status: 206, headers: tagged,
            length: capped.last - capped.first + 1,
            sliceRange: ContentRange(first: capped.first, last: capped.last, length: Int(Int64.max >> 1)), slicing: rangeFill,
            ownSelectors: true, expected: .skip(.sliceRefused)),
        Row(
            name: "a 206 to the client's own Range that is not one range is not stored", validating: stored, status: 206,
            headers: tagged, slicing: rangeFill, ownSelectors: true, expected: .skip(.rules), keepsStored: true),
        Row(
            name: "a 200 to the client's own Range is stored as any 200", headers: tagged, slicing: rangeFill, ownSelectors: true,
            expected: .whole, asksDoorkeeper: true),
    ]

    static func plan(_ row: Row, doorkeeper: (Int?) -> Bool = { _ in true }) -> StoragePlan {
        let request = ResponseAdmission.Request(
            method: row.method, headers: [:], policy: row.policy, directives: .none, validating: row.validating,
            fallback: row.fallback, staleIfErrorWindow: 3600, dedupAlways: false, maxMemoryObject: 1 << 20, negativeTTL: 30,
            sharedKey: row.contentAddressed, holdsSuccess: false, ownSelectors: row.ownSelectors,
            contentAddressed: row.contentAddressed)
        let answer = StoragePlan.Answer(
            head: ResponseHead(status: row.status, headers: row.headers), cacheControl: CacheControl(row.headers),
            contentLength: row.length, announcedLength: row.announced ?? row.length, sliceRange: row.sliceRange)
        return StoragePlan.decide(request, answer: answer, slicing: row.slicing, disk: row.disk, now: now, admitted: doorkeeper)
    }

    @Test(arguments: rows.indices) func eachCase(_ index: Int) {
        let row = Self.rows[index]
        var asked = 0
        let plan = Self.plan(row) { _ in
            asked += 1
            return row.admitted
        }
        #expect(plan.action == row.expected, "\(row.name)")
        #expect((asked > 0) == row.asksDoorkeeper, "\(row.name): doorkeeper asked \(asked) times")
        if let keepsStored = row.keepsStored { #expect(plan.admission.keepsStored == keepsStored, "\(row.name)") }
        let stores: Bool
        switch row.expected {
        case .whole, .streamed, .slices, .slice, .slicesWithin, .slicePart: stores = true
        default: stores = false
        }
        #expect(plan.stores == stores, "\(row.name)")
        #expect(plan.wholeLimit == ResponseAdmission.wholeLimit(maxMemoryObject: 1 << 20, disk: row.disk), "\(row.name)")
    }

    /// Whether the copy a conditional request was sent for goes, with the answer stored or not
    /// (a sink the disk tier refuses stores nothing although the plan stores).
    @Test func aNewAnswerNotStoredOutdatesTheValidatedCopy() {
        let cases: [(row: Row, stored: Bool, outdates: Bool)] = [
            (Row(name: "a new 200 stored replaces it", validating: Self.stored, expected: .whole), true, false),
            (Row(name: "a new 200 the disk refused", validating: Self.stored, expected: .whole), false, true),
            (
                Row(name: "a new no-store 200", validating: Self.stored, headers: ["Cache-Control": "no-store"], expected: .skip(.rules)),
                false, true
            ),
            (
                Row(
                    name: "a 412 to the client's own preconditions keeps it", validating: Self.stored, status: 412, headers: Self.tagged,
                    ownSelectors: true, expected: .skip(.rules)), false, false
            ),
            (
                Row(
                    name: "a HEAD matching it updated it", method: .head, validating: Self.stored, headers: Self.tagged, length: nil,
                    announced: 100, expected: .updateFromHead), false, false
            ),
            (
                Row(
                    name: "a HEAD with another ETag outdated it already", method: .head, validating: Self.stored,
                    headers: ["Cache-Control": "max-age=60", "ETag": "\"b\""], length: nil, announced: 100, expected: .outdateFromHead),
                false,
                false
            ),
        ]
        for (row, stored, outdates) in cases {
            let plan = Self.plan(row)
            #expect(plan.action == row.expected, "\(row.name)")
            #expect(plan.outdatesValidated(stored: stored) == outdates, "\(row.name)")
        }
    }

    /// Which slices lie wholly inside a range: the object's last slice ends at its length.
    @Test(
        arguments: [
            (ContentRange(first: 0, last: 99, length: 1000), 0...0, true),
            (ContentRange(first: 0, last: 98, length: 1000), nil, false),
            (ContentRange(first: 1, last: 199, length: 1000), 1...1, false),
            (ContentRange(first: 50, last: 449, length: 1000), 1...3, false),
            (ContentRange(first: 100, last: 199, length: 1000), 1...1, true),
            (ContentRange(first: 900, last: 949, length: 950), 9...9, true),
            (ContentRange(first: 850, last: 949, length: 950), 9...9, false),
            (ContentRange(first: 10, last: 90, length: 1000), nil, false),
        ] as [(ContentRange, ClosedRange<Int>?, Bool)])
    func wholeSlicesInsideARange(_ range: ContentRange, _ slices: ClosedRange<Int>?, _ isSlice: Bool) {
        #expect(range.wholeSlices(of: 100) == slices, "\(range.fieldValue)")
        #expect(range.isSlice(of: 100) == isSlice, "\(range.fieldValue)")
        #expect(range.wholeSlices(of: 0) == nil && !range.isSlice(of: 0))
    }
}

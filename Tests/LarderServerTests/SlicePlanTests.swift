import LarderCache
import LarderHTTP
import Testing

@testable import LarderServer

/// The slice plan: which slice comes next, which of its bytes, and whether a slice belongs to
/// the object the answer began with.
@Suite(.timeLimit(.minutes(1))) struct SlicePlanTests {
    let size = 100

    @Test func aRangeStartsAtTheSliceHoldingItsFirstByte() {
        #expect(SlicePlan.firstByte(ofRange: "bytes=250-") == 250)
        #expect(SlicePlan.firstByte(ofRange: "bytes=250-300") == 250)
        #expect(SlicePlan.firstByte(ofRange: "bytes=-20") == 0, "a suffix needs the length first")
        #expect(SlicePlan.firstByte(ofRange: "bytes=0-1,5-6") == 0, "several ranges: the whole object")
        #expect(SlicePlan.firstByte(ofRange: "items=5-") == 0)
        #expect(SlicePlan.firstByte(ofRange: nil) == 0)
        var plan = SlicePlan(size: size, firstByte: 250)
        #expect(plan.sliceIndex == 2)
        #expect(plan.ask(for: 2) == "bytes=200-299", "before the length is known a slice is asked for whole")
    }

    @Test func aWholeAnswerWalksEverySliceAndClipsTheLast() {
        var plan = SlicePlan(size: size, firstByte: 0)
        #expect(plan.locate(length: 250, validator: "etag \"a\"", resolution: .full) == .whole(length: 250))
        var parts: [Int: (Int, Int)] = [:]
        while plan.stage == .sending {
            parts[plan.sliceIndex] = plan.needed
            plan.sent(plan.needed.count)
        }
        #expect(parts.count == 3)
        #expect(parts[0]! == (0, 100) && parts[1]! == (0, 100) && parts[2]! == (0, 50))
        #expect(plan.ask(for: 2) == "bytes=200-249")
        #expect(plan.stage == .complete)
    }

    /// A server that caps ranges: each answer holds the next byte but not the rest of the
    /// slice, so the rest is asked for from there, never the whole slice again, and never more
    /// than ``SlicePlan/maxRequestsPerSlice`` times for one slice.
    @Test func theRestOfASliceSentInPartsIsAskedForFromTheNextByte() {
        var plan = SlicePlan(size: size, firstByte: 150)
        #expect(plan.ask(for: 1) == "bytes=100-199")
        #expect(!plan.resumes(1), "the first request for a slice asks for all of it")
        let take = plan.take(.part(ContentRange(first: 100, last: 159, length: 1000)), validator: "etag \"a\"") { _ in
            .partial(first: 150, last: 320)
        }
        #expect(take == .located(.partial(first: 150, last: 320, length: 1000), part: SlicePlan.Part(offset: 50, count: 10)))
        plan.sent(10)
        #expect(plan.resumes(1))
        #expect(plan.ask(for: 1) == "bytes=160-199", "the rest of the slice, from the next byte")
        for byte in 161..<175 {
            #expect(
                plan.take(.part(ContentRange(first: byte - 1, last: byte - 1, length: 1000)), validator: "etag \"a\"") { _ in .full }
                    == .serve(SlicePlan.Part(offset: 0, count: 1)))
            plan.sent(1)
            #expect(plan.ask(for: 1) == "bytes=\(byte)-199")
        }
        #expect(plan.ask(for: 1) == nil, "16 requests for one slice, and no more")
        plan.sent(200 - 174)
        #expect(plan.sliceIndex == 2)
        #expect(!plan.resumes(2))
        #expect(plan.ask(for: 2) == "bytes=200-299", "the next slice starts afresh")
    }

    @Test func aPartialAnswerTakesOnlyTheBytesAskedFor() {
        var plan = SlicePlan(size: size, firstByte: 150)
        #expect(plan.sliceIndex == 1)
        let answer = plan.locate(length: 1000, validator: nil, resolution: .partial(first: 150, last: 320))
        #expect(answer == .partial(first: 150, last: 320, length: 1000))
        #expect(plan.needed == (50, 50))
        plan.sent(50)
        #expect(plan.sliceIndex == 2 && plan.needed == (0, 100))
        plan.sent(100)
        #expect(plan.sliceIndex == 3 && plan.needed == (0, 21))
        plan.sent(21)
        #expect(plan.stage == .complete)
    }

    @Test func aSuffixRangeMovesToTheSliceItNeeds() {
        var plan = SlicePlan(size: size, firstByte: 0)
        _ = plan.locate(length: 1000, validator: nil, resolution: .partial(first: 980, last: 999))
        #expect(plan.sliceIndex == 9 && plan.needed == (80, 20))
    }

    @Test func aRangePastTheEndNeedsNoSlice() {
        var plan = SlicePlan(size: size, firstByte: 5000)
        plan.look(at: 0)
        #expect(plan.sliceIndex == 0)
        #expect(plan.locate(length: 1000, validator: nil, resolution: .unsatisfiable) == .unsatisfiable(length: 1000))
        #expect(plan.stage == .complete)
    }

    @Test func validatorsAreStrongETagsElseDates() {
        var headers = HTTPHeaders()
        #expect(SlicePlan.validator(of: headers) == nil)
        headers.add("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(SlicePlan.validator(of: headers) == "date Sun, 06 Nov 1994 08:49:37 GMT")
        headers.add("ETag", "W/\"weak\"")
        #expect(SlicePlan.validator(of: headers) == "date Sun, 06 Nov 1994 08:49:37 GMT", "a weak tag says nothing of the bytes")
        headers.remove("ETag")
        headers.add("ETag", "\"strong\"")
        #expect(SlicePlan.validator(of: headers) == "etag \"strong\"")
    }

    @Test(arguments: [
        (nil, nil, nil, false),
        ("\"strong\"", nil, nil, true),
        ("W/\"weak\"", "Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", false),
        (nil, "Sun, 06 Nov 1994 08:49:37 GMT", nil, false),
        (nil, "Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:50:36 GMT", false),
        (nil, "Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:50:37 GMT", true),
    ])
    func slicesCombineOnlyUnderAStrongValidator(etag: String?, modified: String?, date: String?, combines: Bool) {
        var headers = HTTPHeaders()
        if let etag { headers.add("ETag", etag) }
        if let modified { headers.add("Last-Modified", modified) }
        if let date { headers.add("Date", date) }
        #expect(StoragePlan.hasSliceValidator(headers) == combines, "RFC 9111 §3.4, RFC 9110 §8.8.2.2: 60 s before the Date")
    }

    @Test func contentRangeParsing() {
        #expect(ContentRange("bytes 0-99/1000") == ContentRange(first: 0, last: 99, length: 1000))
        #expect(ContentRange("bytes 0-99/*") == nil, "a slice needs the length")
        #expect(ContentRange("bytes 100-99/1000") == nil)
        #expect(ContentRange("bytes 0-1000/1000") == nil)
        #expect(ContentRange("items 0-1/2") == nil)
        #expect(ContentRange("bytes */1000") == nil)
    }
}

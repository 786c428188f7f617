import LarderCache
import LarderHTTP
import Testing

@testable import LarderServer

/// What an origin's answer to a slice request gives the client's answer: only bytes at the
/// positions its Content-Range names, from the next byte the client needs (the rest of the
/// slice is asked for again); anything else goes to the origin again before the head, and cuts
/// the answer short after it.
@Suite(.timeLimit(.minutes(1))) struct SlicePlanTakeTests {
    static let size = 100
    static let tag = "etag \"a\""

    static func range(_ first: Int, _ last: Int, _ length: Int) -> ContentRange {
        ContentRange(first: first, last: last, length: length)
    }

    static func part(_ offset: Int, _ count: Int) -> SlicePlan.Part { SlicePlan.Part(offset: offset, count: count) }

    struct First: CustomTestStringConvertible, Sendable {
        let name: String
        /// The client's Range, if any.
        let clientRange: String?
        let reply: SlicePlan.Reply
        var validator: String? = SlicePlanTakeTests.tag
        let take: SlicePlan.Take
        var testDescription: String { name }
    }

    static let firsts: [First] = [
        First(
            name: "the slice asked for", clientRange: "bytes=0-9", reply: .part(range(0, 99, 250)),
            take: .located(.partial(first: 0, last: 9, length: 250), part: part(0, 10))),
        First(
            name: "a capped answer holding the client's bytes", clientRange: "bytes=0-4", reply: .part(range(0, 4, 1000)),
            take: .located(.partial(first: 0, last: 4, length: 1000), part: part(0, 5))),
        First(
            name: "a capped answer short of the client's bytes", clientRange: "bytes=0-49", reply: .part(range(0, 4, 1000)),
            take: .located(.partial(first: 0, last: 49, length: 1000), part: part(0, 5))),
        First(
            name: "a whole request, capped", clientRange: nil, reply: .part(range(0, 4, 1000)),
            take: .located(.whole(length: 1000), part: part(0, 5))),
        First(
            name: "a capped answer that starts after the client's first byte", clientRange: "bytes=0-49",
            reply: .part(range(1, 4, 1000)), take: .pass),
        First(
            name: "another range holding the client's bytes", clientRange: "bytes=250-255", reply: .part(range(240, 260, 1000)),
            take: .located(.partial(first: 250, last: 255, length: 1000), part: part(10, 6))),
        First(
            name: "another range without them", clientRange: "bytes=250-255", reply: .part(range(0, 99, 1000)), take: .pass),
        First(
            name: "the slice asked for, the client's bytes in another", clientRange: "bytes=-10", reply: .part(range(0, 99, 1000)),
            take: .located(.partial(first: 990, last: 999, length: 1000), part: nil)),
        First(
            name: "an object smaller than the range", clientRange: "bytes=250-", reply: .part(range(0, 49, 50)),
            take: .located(.unsatisfiable(length: 50), part: nil)),
        First(
            name: "a larger range serves to its end", clientRange: "bytes=50-", reply: .part(range(0, 199, 250)),
            take: .located(.partial(first: 50, last: 249, length: 250), part: part(50, 150))),
        First(
            name: "no validator, the answer holding all the client needs", clientRange: "bytes=0-9", reply: .part(range(0, 99, 250)),
            validator: nil, take: .located(.partial(first: 0, last: 9, length: 250), part: part(0, 10))),
        First(
            name: "no validator, the client's range over several slices", clientRange: "bytes=0-149",
            reply: .part(range(0, 99, 250)), validator: nil, take: .pass),
        First(
            name: "no validator, a capped answer short of the client's bytes", clientRange: "bytes=0-49",
            reply: .part(range(0, 4, 1000)), validator: nil, take: .pass),
        First(
            name: "no validator, a whole request over several slices", clientRange: nil, reply: .part(range(0, 99, 250)),
            validator: nil, take: .pass),
        First(
            name: "no validator, the client's bytes in another slice", clientRange: "bytes=-10", reply: .part(range(0, 99, 1000)),
            validator: nil, take: .pass),
        First(name: "multipart or a bad Content-Range", clientRange: "bytes=0-9", reply: .unusable, take: .pass),
        First(name: "a 200", clientRange: "bytes=0-9", reply: .whole(length: 250), take: .ordinary),
        First(name: "a 200 of unknown length", clientRange: nil, reply: .whole(length: nil), take: .ordinary),
        First(name: "an error", clientRange: "bytes=0-9", reply: .other(status: 503), take: .ordinary),
        First(name: "a 416", clientRange: "bytes=250-", reply: .other(status: 416), take: .ordinary),
    ]

    @Test(arguments: firsts) func theFirstAnswerLocatesTheObjectOrFallsBack(_ row: First) {
        var request = HTTPHeaders()
        if let clientRange = row.clientRange { request.add("Range", clientRange) }
        var plan = SlicePlan(size: Self.size, firstByte: SlicePlan.firstByte(ofRange: row.clientRange))
        let before = plan
        let take = plan.take(row.reply, validator: row.validator) { length in
            RangeRequest.resolve(request: request, length: length, responseHeaders: HTTPHeaders())
        }
        #expect(take == row.take)
        if take == .pass || take == .ordinary { #expect(plan == before, "nothing is decided by an answer not taken") }
    }

    struct Later: CustomTestStringConvertible, Sendable {
        let name: String
        let reply: SlicePlan.Reply
        var validator = SlicePlanTakeTests.tag
        let take: SlicePlan.Take
        var testDescription: String { name }
    }

    /// An answer for all 250 bytes, the first slice sent: byte 100 is next.
    static let laters: [Later] = [
        Later(name: "the next slice", reply: .part(range(100, 199, 250)), take: .serve(part(0, 100))),
        Later(name: "another validator", reply: .part(range(100, 199, 250)), validator: "etag \"b\"", take: .changed),
        Later(name: "another length", reply: .part(range(100, 199, 300)), take: .changed),
        Later(name: "a capped answer", reply: .part(range(100, 150, 250)), take: .serve(part(0, 51))),
        Later(name: "one byte", reply: .part(range(100, 100, 250)), take: .serve(part(0, 1))),
        Later(
            name: "an answer after the next byte", reply: .part(range(101, 199, 250)),
            take: .cut("the origin answered a slice request with bytes 101-199, not 100-")),
        Later(
            name: "not the next slice", reply: .part(range(200, 249, 250)),
            take: .cut("the origin answered a slice request with bytes 200-249, not 100-")),
        Later(name: "a range holding more", reply: .part(range(50, 249, 250)), take: .serve(part(50, 150))),
        Later(name: "the whole object", reply: .whole(length: 250), take: .serve(part(100, 150))),
        Later(name: "the whole of another object", reply: .whole(length: 250), validator: "etag \"b\"", take: .changed),
        Later(name: "a whole object of another length", reply: .whole(length: 300), take: .changed),
        Later(
            name: "a whole object of unknown length", reply: .whole(length: nil),
            take: .cut("the origin answered a slice request with a 200 of unknown length")),
        Later(
            name: "multipart", reply: .unusable,
            take: .cut("the origin answered a slice request with a 206 that is not one range of its length")),
        Later(name: "an error", reply: .other(status: 503), take: .cut("the origin answered a slice request with 503")),
        Later(name: "a success of another object", reply: .other(status: 204), validator: "etag \"b\"", take: .changed),
    ]

    @Test(arguments: laters) func laterAnswersMustBeOfTheSameObjectAndHoldTheNextBytes(_ row: Later) {
        var plan = SlicePlan(size: Self.size, firstByte: 0)
        _ = plan.locate(length: 250, validator: Self.tag, resolution: .full)
        plan.sent(100)
        let before = plan
        #expect(plan.take(row.reply, validator: row.validator) { _ in .full } == row.take)
        #expect(plan == before, "a later answer changes nothing but what is sent")
    }

    struct Inside: CustomTestStringConvertible, Sendable {
        let name: String
        /// Requests made for slice 1 before the answer (the first asks for all of it).
        let asked: Int
        let reply: SlicePlan.Reply
        let take: SlicePlan.Take
        var testDescription: String { name }
    }

    /// The client's range starts inside slice 1 (byte 150 of 250, located from slice 0): a
    /// capped answer to the request for the whole slice may end before byte 150, and the rest
    /// of the slice is then asked for; an answer to that request must hold byte 150.
    static let insides: [Inside] = [
        Inside(name: "a capped answer short of the client's first byte", asked: 1, reply: .part(range(100, 129, 250)), take: .askAgain),
        Inside(name: "a capped answer holding it", asked: 1, reply: .part(range(100, 159, 250)), take: .serve(part(50, 10))),
        Inside(
            name: "the same answer to the request for the rest", asked: 2, reply: .part(range(100, 129, 250)),
            take: .cut("the origin answered a slice request with bytes 100-129, not 150-")),
        Inside(
            name: "a short answer not from the slice's first byte", asked: 1, reply: .part(range(110, 129, 250)),
            take: .cut("the origin answered a slice request with bytes 110-129, not 150-")),
        Inside(
            name: "a short answer of the slice before", asked: 1, reply: .part(range(0, 29, 250)),
            take: .cut("the origin answered a slice request with bytes 0-29, not 150-")),
        Inside(name: "another length", asked: 1, reply: .part(range(100, 129, 300)), take: .changed),
    ]

    @Test(arguments: insides) func aCappedAnswerShortOfARangeStartingInsideTheSliceAsksAgain(_ row: Inside) {
        var plan = SlicePlan(size: Self.size, firstByte: 150)
        plan.look(at: 0)
        _ = plan.locate(length: 250, validator: Self.tag, resolution: .partial(first: 150, last: 249))
        for _ in 0..<row.asked { _ = plan.ask(for: 1) }
        let before = plan
        #expect(plan.take(row.reply, validator: Self.tag) { _ in .full } == row.take)
        #expect(plan == before, "a later answer changes nothing but what is sent")
        if row.take == .askAgain { #expect(plan.ask(for: 1) == "bytes=150-199", "the rest, from the client's next byte") }
    }

    /// A stored slice is used only when it is the slice the current size cuts: one stored
    /// under another `cache.slice_size` is not.
    @Test func aStoredSliceIsOneOfTheCurrentSize() {
        let plan = SlicePlan(size: Self.size, firstByte: 0)
        #expect(plan.isSlice(0, Self.range(0, 99, 250)))
        #expect(plan.isSlice(2, Self.range(200, 249, 250)), "the last slice, clipped to the length")
        #expect(plan.isSlice(0, Self.range(0, 49, 50)), "an object shorter than a slice")
        #expect(!plan.isSlice(0, Self.range(0, 63, 250)), "a smaller size's first slice")
        #expect(!plan.isSlice(1, Self.range(64, 127, 250)), "a smaller size's second slice")
        #expect(!plan.isSlice(1, Self.range(150, 249, 250)), "a larger size's second slice")
        #expect(plan.isSlice(2, Self.range(200, 299, 300)), "the same slice of a longer object")
    }

    struct Head: CustomTestStringConvertible, Sendable {
        let name: String
        let status: Int
        let fields: [(String, String)]
        let bodyLength: Int?
        let reply: SlicePlan.Reply
        var testDescription: String { name }
    }

    static let heads: [Head] = [
        Head(name: "a 200", status: 200, fields: [], bodyLength: 10, reply: .whole(length: 10)),
        Head(name: "a chunked 200", status: 200, fields: [], bodyLength: nil, reply: .whole(length: nil)),
        Head(name: "one range", status: 206, fields: [("Content-Range", "bytes 0-9/100")], bodyLength: 10, reply: .part(range(0, 9, 100))),
        Head(
            name: "one range, chunked", status: 206, fields: [("Content-Range", "bytes 0-9/100")], bodyLength: nil,
            reply: .part(range(0, 9, 100))),
        Head(
            name: "a length unlike the range", status: 206, fields: [("Content-Range", "bytes 0-9/100")], bodyLength: 11, reply: .unusable),
        Head(
            name: "multipart/byteranges", status: 206,
            fields: [("Content-Type", "multipart/byteranges; boundary=x"), ("Content-Range", "bytes 0-9/100")], bodyLength: 300,
            reply: .unusable),
        Head(name: "no Content-Range", status: 206, fields: [], bodyLength: 10, reply: .unusable),
        Head(name: "an unknown length", status: 206, fields: [("Content-Range", "bytes 0-9/*")], bodyLength: 10, reply: .unusable),
        Head(name: "a 416", status: 416, fields: [("Content-Range", "bytes */100")], bodyLength: 0, reply: .other(status: 416)),
    ]

    @Test(arguments: heads) func anAnswerIsReadFromItsHead(_ row: Head) {
        var headers = HTTPHeaders()
        for (name, value) in row.fields { headers.add(name, value) }
        #expect(SlicePlan.Reply(status: row.status, headers: headers, bodyLength: row.bodyLength) == row.reply)
    }
}

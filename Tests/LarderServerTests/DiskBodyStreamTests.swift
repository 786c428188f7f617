import LarderCache
import LarderHTTP
import Testing

@testable import LarderServer

/// The walk of a disk body over one block: which block is read next, when, and which of its
/// bytes are sent.
@Suite(.timeLimit(.minutes(1))) struct DiskBodyStreamTests {
    static let block = DiskEntryFormat.blockSize
    static let stored = StoredResponse.make(
        key: CacheKey(normalized: "http://example.org/big"), status: 200, reason: "OK", headers: [:], body: .memory([]),
        requestTime: 0, responseTime: 0, varyValues: [:])

    @Test func aWholeBodyWalksEveryBlockOnce() {
        var stream = DiskBodyStream(stored: Self.stored, first: 0, count: 2 * Self.block + 10)
        var sent = 0
        var blocks: [Int] = []
        while let block = stream.blockToRead(pendingOutput: 0) {
            blocks.append(block)
            let count = min(Self.block, 2 * Self.block + 10 - block * Self.block)
            let part = stream.take(block: block, count: count)
            #expect(part.offset == 0)
            sent += part.count
        }
        #expect(blocks == [0, 1, 2])
        #expect(sent == 2 * Self.block + 10)
        #expect(stream.isDone)
    }

    @Test func aRangeReadsOnlyTheBlocksItTouchesAndSendsOnlyItsBytes() {
        let first = 3_000_000
        let count = 700_001
        var stream = DiskBodyStream(stored: Self.stored, first: first, count: count)
        #expect(stream.blockToRead(pendingOutput: 0) == 2)
        let head = stream.take(block: 2, count: Self.block)
        #expect(head.offset == first - 2 * Self.block)
        #expect(head.count == 3 * Self.block - first)
        #expect(stream.blockToRead(pendingOutput: 0) == 3)
        let tail = stream.take(block: 3, count: Self.block)
        #expect(tail.offset == 0 && head.count + tail.count == count)
        #expect(stream.isDone && stream.blockToRead(pendingOutput: 0) == nil)
    }

    /// At most one block read at a time, and only while at most one block waits to be sent:
    /// a slow client holds about two blocks.
    @Test func aBlockIsAskedForOnlyWhenTheOutputHasRoomAndNoneIsBeingRead() {
        var stream = DiskBodyStream(stored: Self.stored, first: 0, count: 4 * Self.block)
        #expect(stream.blockToRead(pendingOutput: Self.block) == 0)
        #expect(stream.blockToRead(pendingOutput: Self.block + 1) == nil, "over a block waits: no read")
        stream.reading = 7
        #expect(stream.blockToRead(pendingOutput: 0) == nil, "one read at a time")
        stream.reading = nil
        _ = stream.take(block: 0, count: Self.block)
        #expect(stream.blockToRead(pendingOutput: Self.block) == 1)
    }
}

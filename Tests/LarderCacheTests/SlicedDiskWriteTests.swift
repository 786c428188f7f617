import Dispatch
import LarderHTTP
import LarderIO
import Synchronization
import Testing

@testable import LarderCache

/// Slices written as a body streams: every slice of a whole response, or the whole slices
/// inside another range (RFC 9111 §3.3), each stored under its own key with its own range.
@Suite(.timeLimit(.minutes(1))) struct SlicedDiskWriteTests {
    static let head = DiskEntryFormat.Head(
        key: "", status: 206, reason: "Partial Content", requestTime: 100, responseTime: 101, vary: [:],
        headers: ["Cache-Control": "max-age=60", "ETag": "\"a\""])

    /// The stored slice `index` of `key`, checked as a client would read it.
    static func slice(_ disk: DiskCache, _ key: CacheKey, _ index: Int) -> (range: String?, body: [UInt8]?)? {
        for _ in 0..<2 {
            switch disk.lookup(key.slice(index), request: [:]) {
            case .miss:
                return nil
            case .hit(let stored):
                return (stored.headers["Content-Range"], checkedBody(disk, stored))
            case .unverified(let name):
                let done = DispatchSemaphore(value: 0)
                disk.verify(name, key: key.slice(index)) { _ in done.signal() }
                done.wait()
            }
        }
        return nil
    }

    @Test func theWholeSlicesInsideARangeAreStoredEachAsItsSlice() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/sliced")
        let object = pattern(1000, seed: 3)
        // Bytes 150-999: slice 1 only in part; slices 2-9 whole (the last ends at the end).
        let write = SlicedDiskWrite(
            cache: cache, key: key, size: 100, range: ContentRange(first: 150, last: 999, length: 1000), head: Self.head)
        var offset = 150
        while offset < 1000 {
            let end = min(offset + 37, 1000)
            write.append(Array(object[offset..<end]))
            offset = end
        }
        fixture.cache.drain()
        #expect(!write.hasFailed)
        #expect(Self.slice(fixture.cache, key, 0) == nil)
        #expect(Self.slice(fixture.cache, key, 1) == nil, "a slice the range holds in part is not stored")
        for index in 2...9 {
            let stored = Self.slice(fixture.cache, key, index)
            #expect(stored?.range == "bytes \(index * 100)-\(index * 100 + 99)/1000", "slice \(index)")
            #expect(stored?.body == Array(object[(index * 100)..<(index * 100 + 100)]), "slice \(index)")
        }
    }

    /// A reader behind the fill's memory takes a finished slice's bytes from that slice's own
    /// file. When the object was stored again meanwhile (its slice renamed over the name), the
    /// name holds another write's bytes: those are not this fill's, so none are read, and
    /// nothing is counted as damage (that newer entry is sound).
    @Test func aSliceRenamedOverByANewerWriteIsNotReadAsThisFillsBytes() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/replaced")
        let object = pattern(1000, seed: 7)
        let write = SlicedDiskWrite(cache: cache, key: key, size: 100, length: 1000, head: Self.head)
        write.append(Array(object[0..<200]))
        fixture.cache.drain()
        let newer = SlicedDiskWrite(cache: cache, key: key, size: 100, length: 1000, head: Self.head)
        newer.append(Array(pattern(1000, seed: 8)[0..<100]))
        fixture.cache.drain()
        #expect(write.data(at: 10, limit: 200) == nil, "slice 0's name holds the newer write's file")
        let block = try #require(write.data(at: 150, limit: 200), "slice 1's name still holds this write's file")
        let done = DispatchSemaphore(value: 0)
        let read = Locked<[UInt8]?>(nil)
        block.write.readBlock(block.index, range: block.bytes, from: block.file) { result in
            if case .checked(let bytes) = result { read.withLock { $0 = bytes } }
            done.signal()
        }
        done.wait()
        #expect(read.withLock { $0 } == Array(object[100..<200]))
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 0)
        #expect(Self.slice(fixture.cache, key, 0)?.body == Array(pattern(1000, seed: 8)[0..<100]), "the newer slice stays")
    }

    @Test func aRangeThatBreaksOffKeepsTheSlicesItCompleted() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/broken")
        let object = pattern(1000, seed: 5)
        let write = SlicedDiskWrite(
            cache: cache, key: key, size: 100, range: ContentRange(first: 250, last: 749, length: 1000), head: Self.head)
        write.append(Array(object[250..<420]))
        write.abortUnfinished()
        fixture.cache.drain()
        #expect(Self.slice(fixture.cache, key, 2) == nil)
        #expect(Self.slice(fixture.cache, key, 3)?.body == Array(object[300..<400]))
        #expect(Self.slice(fixture.cache, key, 4) == nil, "the slice in progress is dropped")
    }
}

import LarderHTTP
import LarderIO

/// A large response stored as fixed slices while it streams (`cache.slice_size`): each slice
/// is an entry of its own (key `…#slice=N`, a 206 with its Content-Range), written by its own
/// ``DiskWrite`` and finished the moment its last byte arrives. A transfer that breaks off
/// keeps every slice completed before it; the next request fetches only the missing ones.
///
/// A slice fill's answer for another range of the object, or the 206 to a client's own Range,
/// is written the same way, from the first whole slice inside it to the last
/// (``TieredCache/open(_:head:cacheControl:entry:)``):
/// its body starts at `start` of the object, the bytes outside those slices are skipped, and
/// no reader follows its files (the fill keeps no disk file for them), so a disk that falls
/// ``maxBacklog`` behind stops the storing rather than the transfer.
///
/// State: loop-confined, owned by the ``StoreSink`` of the fill that receives the body.
public final class SlicedDiskWrite {
    private let cache: TieredCache
    private let key: CacheKey
    private let size: Int
    private let length: Int
    /// The slices inside a range: no reader follows their files, so nothing paces the
    /// transfer to the disk (``maxBacklog``).
    private let unpaced: Bool
    /// The slices written: all of a whole response's, or the whole ones inside a range.
    private let indexes: ClosedRange<Int>
    /// The slices' common head: status 206; each slice adds its Content-Range.
    private let head: DiskEntryFormat.Head
    /// When the fetch began: no slice is stored after a purge or ban of the object since.
    private let stamp: InvalidationLog.Stamp?
    private var writes: [DiskWrite] = []
    /// Read descriptors on slices a lagging reader follows, opened on first use.
    private var files: [Int: OpenFile] = [:]
    /// The object position of the next body byte.
    private var received = 0
    /// Bytes handed to the slice writes.
    private var written = 0
    /// Leading slices fully durable, and fully checkable (every block's checksum published), so
    /// that `durableBytes` and `checkableBytes` need not walk them all.
    private var durableSlices = 0
    private var checkableSlices = 0
    /// A slice could not be started or written: nothing more is stored.
    public private(set) var hasFailed = false

    /// The disk writes' bytes not yet durable past which a write of the slices inside a range
    /// stops (it has no way to pause the transfer).
    static let maxBacklog = 8 << 20

    /// A whole response of `length` bytes, every slice of it.
    convenience init(
        cache: TieredCache, key: CacheKey, size: Int, length: Int, head: DiskEntryFormat.Head, stamp: InvalidationLog.Stamp? = nil
    ) {
        self.init(
            cache: cache, key: key, size: size, range: ContentRange(first: 0, last: max(0, length - 1), length: length), head: head,
            stamp: stamp, unpaced: false)
    }

    /// The body of a 206 holding `range`: the whole slices inside it (at least one, as the
    /// storage plan checked). `head` carries no Content-Range; each slice adds its own.
    init(
        cache: TieredCache, key: CacheKey, size: Int, range: ContentRange, head: DiskEntryFormat.Head,
        stamp: InvalidationLog.Stamp? = nil, unpaced: Bool = true
    ) {
        self.cache = cache
        self.stamp = stamp
        self.key = key
        self.size = size
        length = range.length
        self.unpaced = unpaced
        indexes = range.wholeSlices(of: size) ?? 0...0
        received = range.first
        self.head = head
    }

    /// Object positions of slice `index`.
    private func bounds(_ index: Int) -> Range<Int> { (index * size)..<min((index + 1) * size, length) }

    /// Appends body bytes, splitting them at slice boundaries.
    func append(_ chunk: [UInt8]) {
        var offset = 0
        let end = bounds(indexes.upperBound).upperBound
        while offset < chunk.count, !hasFailed, received < end {
            let index = received / size
            guard index >= indexes.lowerBound else {
                // Before the first whole slice: not kept.
                let skipped = min(chunk.count - offset, bounds(index).upperBound - received)
                received += skipped
                offset += skipped
                continue
            }
            if index - indexes.lowerBound == writes.count {
                let range = bounds(index)
                var sliceHead = head
                sliceHead.key = key.slice(index).url
                sliceHead.headers.add(
                    "Content-Range", ContentRange(first: range.lowerBound, last: range.upperBound - 1, length: length).fieldValue)
                guard
                    let write = cache.beginDiskWrite(
                        key: key.slice(index), head: sliceHead, expectedLength: range.count, stamp: stamp)
                else {
                    hasFailed = true
                    return
                }
                writes.append(write)
            }
            let write = writes[index - indexes.lowerBound]
            let sliceEnd = bounds(index).upperBound
            let count = min(chunk.count - offset, sliceEnd - received)
            write.append(offset == 0 && count == chunk.count ? chunk : Array(chunk[offset..<(offset + count)]))
            received += count
            written += count
            offset += count
            if received == sliceEnd { write.finish(expectedLength: sliceEnd - index * size) }
            if write.hasFailed { hasFailed = true }
        }
        if unpaced, !hasFailed, written - durableBytes >= SlicedDiskWrite.maxBacklog {
            abortUnfinished()
            hasFailed = true
        }
    }

    /// The transfer ended early: the slice in progress is dropped, completed ones stay.
    func abortUnfinished() {
        let index = indexes.lowerBound + writes.count - 1
        guard let last = writes.last, received < bounds(index).upperBound else { return }
        last.abort()
    }

    /// Body bytes durable from byte 0 on, without a gap.
    public var durableBytes: Int { bytesFromStart(past: &durableSlices) { $0.durableBytes.load(ordering: .acquiring) } }

    /// Body bytes from byte 0 on, without a gap, in blocks whose checksums their slices'
    /// writes have published: what a fill may drop from memory.
    public var checkableBytes: Int { bytesFromStart(past: &checkableSlices) { $0.checkableBytes.load(ordering: .acquiring) } }

    /// Body bytes from byte 0 on, without a gap, that every slice's write has `done` (of its
    /// own bytes); `whole` counts the leading slices already done in full, so that each call
    /// walks only from the first slice still in progress.
    /// (For the slices inside a range: bytes from its first whole slice on.)
    private func bytesFromStart(past whole: inout Int, _ done: (DiskWrite) -> Int) -> Int {
        let base = indexes.lowerBound * size
        while whole < writes.count {
            let slice = bounds(indexes.lowerBound + whole)
            let bytes = done(writes[whole])
            guard bytes == slice.count else { return slice.lowerBound - base + bytes }
            whole += 1
        }
        return whole == 0 ? 0 : bounds(indexes.lowerBound + whole - 1).upperBound - base
    }

    /// Where a reader behind the memory window finds byte `position` (below `limit`): the
    /// checkable block of its slice's file that holds it.
    public func data(at position: Int, limit: Int) -> DiskWrite.ReadableBlock? {
        let index = position / size
        guard index < writes.count, position < limit else { return nil }
        let write = writes[index]
        let offset = position - index * size
        guard let block = write.checkableBlock(containing: offset) else { return nil }
        let file: OpenFile
        if let open = files[index] {
            file = open
        } else {
            guard let opened = write.openForReading() else { return nil }
            files[index] = opened
            file = opened
        }
        // Files of slices every reader has passed are closed (see `release(before:)`).
        return DiskWrite.ReadableBlock(
            write: write, file: file, index: block.index, bytes: block.bytes, start: index * size + block.bytes.lowerBound)
    }

    /// Closes the read descriptors of slices wholly before `position`.
    public func release(before position: Int) {
        for index in files.keys where bounds(index).upperBound <= position { files[index] = nil }
    }
}

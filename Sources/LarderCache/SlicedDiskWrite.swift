import LarderHTTP
import LarderIO

/// A large response stored as fixed slices while it streams (`cache.slice_size`): each slice
/// is an entry of its own (key `…#slice=N`, a 206 with its Content-Range), written by its own
/// ``DiskWrite`` and finished the moment its last byte arrives. A transfer that breaks off
/// keeps every slice completed before it; the next request fetches only the missing ones.
///
/// State: loop-confined, owned by the ``StoreSink`` of the fill that receives the body.
public final class SlicedDiskWrite {
    private let cache: TieredCache
    private let key: CacheKey
    private let size: Int
    private let length: Int
    /// The slices' common head: status 206; each slice adds its Content-Range.
    private let head: DiskEntryFormat.Head
    private var writes: [DiskWrite] = []
    /// Read descriptors on slices a lagging reader follows, opened on first use.
    private var files: [Int: OpenFile] = [:]
    /// Body bytes handed to the slice writes.
    private var received = 0
    /// Leading slices fully durable, and fully checkable (every block's checksum published), so
    /// that `durableBytes` and `checkableBytes` need not walk them all.
    private var durableSlices = 0
    private var checkableSlices = 0
    /// A slice could not be started or written: nothing more is stored.
    public private(set) var hasFailed = false

    init(cache: TieredCache, key: CacheKey, size: Int, length: Int, head: DiskEntryFormat.Head) {
        self.cache = cache
        self.key = key
        self.size = size
        self.length = length
        self.head = head
    }

    private func bounds(_ index: Int) -> Range<Int> { (index * size)..<min((index + 1) * size, length) }

    /// Appends body bytes, splitting them at slice boundaries.
    func append(_ chunk: [UInt8]) {
        var offset = 0
        while offset < chunk.count, !hasFailed, received < length {
            let index = received / size
            if index == writes.count {
                let range = bounds(index)
                var sliceHead = head
                sliceHead.key = key.slice(index).url
                sliceHead.headers.add(
                    "Content-Range", ContentRange(first: range.lowerBound, last: range.upperBound - 1, length: length).fieldValue)
                guard let write = cache.beginDiskWrite(key: key.slice(index), head: sliceHead, expectedLength: range.count) else {
                    hasFailed = true
                    return
                }
                writes.append(write)
            }
            let end = bounds(index).upperBound
            let count = min(chunk.count - offset, end - received)
            writes[index].append(offset == 0 && count == chunk.count ? chunk : Array(chunk[offset..<(offset + count)]))
            received += count
            offset += count
            if received == end { writes[index].finish(expectedLength: end - index * size) }
            if writes[index].hasFailed { hasFailed = true }
        }
    }

    /// The transfer ended early: the slice in progress is dropped, completed ones stay.
    func abortUnfinished() {
        guard let last = writes.last, received < bounds(writes.count - 1).upperBound else { return }
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
    private func bytesFromStart(past whole: inout Int, _ done: (DiskWrite) -> Int) -> Int {
        while whole < writes.count {
            let slice = bounds(whole)
            let bytes = done(writes[whole])
            guard bytes == slice.count else { return slice.lowerBound + bytes }
            whole += 1
        }
        return whole == 0 ? 0 : bounds(whole - 1).upperBound
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

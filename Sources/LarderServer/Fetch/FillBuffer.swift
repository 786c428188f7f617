import LarderCache
import LarderHTTP
import LarderIO

/// The body of a fill as its readers take it, each at its own position (read-while-writer).
///
/// Body bytes are kept in memory while the whole body may still go to the memory tier; past
/// that, chunks are dropped once every reader has taken them or once their blocks are written
/// to the disk tier's file with their checksums published, from which a reader that fell
/// behind continues, a checked block at a time. So a slow client never slows the fill or the
/// other clients; only without a disk file does the transfer pause for the slowest reader
/// (bounded memory either way), and then only while no other reader keeps up
/// (``laggards(_:)``: those are let go instead).
///
/// A value inside its ``Fill``: nothing allocated for it per fill. What it knows of the disk
/// file comes from the fill's ``StoreSink``, passed in as a ``Backing``.
///
/// State: loop-confined, like its fill.
struct FillBuffer {
    struct Reader {
        let reader: any FillReader
        var position: Int
        let requestHeaders: HTTPHeaders
        /// The reader the fill was made for (its request is the fill's): every other one joined
        /// by URL and is checked against the response (variant, `private`). Not necessarily
        /// the first: that one may have left, and a background refresh has none.
        var isOwn = false
    }

    /// What the buffer needs of the fill's sink: whether the body is kept whole, and the disk
    /// entry (or slices) it streams to.
    struct Backing {
        let keepsWhole: Bool
        let diskWrite: DiskWrite?
        let slicedWrite: SlicedDiskWrite?
    }

    var readers: [Reader] = []
    private(set) var chunks: [[UInt8]] = []
    /// Where `chunks[0]` starts in the body (the chunks are contiguous).
    private var firstStart = 0
    /// Where `chunks[1...]` start: apart from the first's, so that a body of one chunk (most
    /// responses) allocates no array for it.
    private var laterStarts: [Int] = []
    /// Where the chunks kept start in the body; nil when none is kept.
    private var keptFrom: Int? { chunks.isEmpty ? nil : firstStart }
    /// Body bytes received so far.
    private(set) var received = 0
    /// The transfer was told to stop delivering until readers or the disk thread catch up.
    var paused = false
    /// A read descriptor on the disk entry, opened the first time memory chunks are dropped in
    /// its favour.
    private(set) var spill: OpenFile?
    /// The write `spill` reads, kept once it is open: a transfer that fails lets go of the
    /// sink's write (its file is deleted), and readers behind the memory window still have to
    /// reach the end of what arrived (where their response ends short) through the blocks it
    /// published. Without it they waited forever for bytes no one could give them.
    private(set) var spillWrite: DiskWrite?

    /// How far the slowest reader may fall behind before the transfer pauses (no disk file).
    static let highWater = 1 << 20
    static let lowWater = 256 << 10
    /// Bytes always kept in memory at the end of the body, so readers that keep up never need
    /// the file.
    static let memoryWindow = 1 << 20
    /// Bytes received but not yet written by the disk thread before the transfer pauses.
    static let maxWriteBacklog = 8 << 20
    /// What every fill streaming to disk may hold for the disk thread together, before each
    /// holds less (down to ``minWriteBacklog``): a client starting many downloads it never
    /// reads (of distinct URLs, or hosts) made each hold ``maxWriteBacklog`` and more when the
    /// disk fell behind, ~18 MiB of memory a connection (review 117).
    static let writeBacklogBudget = 64 << 20
    static let minWriteBacklog = 1 << 20

    /// A fill's backlog when `streams` fills stream to disk at once (itself included).
    static func writeBacklog(streams: Int) -> Int {
        min(maxWriteBacklog, max(minWriteBacklog, writeBacklogBudget / max(1, streams)))
    }

    /// Keeps `bytes` at the end of the body; returns the chunk, for the sink.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let chunk = Array(bytes)
        if chunks.isEmpty { firstStart = received } else { laterStarts.append(received) }
        chunks.append(chunk)
        received += bytes.count
        return chunk
    }

    /// Whether a new reader could still start from byte 0: nothing received yet, or every byte
    /// still in memory, or the bytes dropped from memory readable from the disk file.
    mutating func holdsFromStart(_ backing: Backing) -> Bool {
        if received == 0 || keptFrom == 0 { return true }
        guard let durable = spillableBytes(backing) else { return false }
        return durable >= (keptFrom ?? received)
    }

    /// Where the body byte at `position` is, or nil if it has not arrived (``FillData/lost``
    /// when it will never be had again).
    func data(at position: Int, slicedWrite: @autoclosure () -> SlicedDiskWrite?) -> FillData? {
        guard position < received else { return nil }
        if let first = keptFrom, position >= first {
            var low = 0
            var high = chunks.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if laterStarts[middle - 1] <= position { low = middle } else { high = middle - 1 }
            }
            return .memory(chunks[low], offset: position - (low == 0 ? first : laterStarts[low - 1]))
        }
        // Dropped from memory: only ever after its block's checksum was published, so a block
        // that cannot be had now never will be (the reader would otherwise wait forever).
        if let slicedWrite = slicedWrite() {
            guard let block = slicedWrite.data(at: position, limit: keptFrom ?? received) else { return .lost }
            return .block(block)
        }
        guard let spill, let spillWrite, let block = spillWrite.checkableBlock(containing: position) else { return .lost }
        return .block(FillData.Block(write: spillWrite, file: spill, index: block.index, bytes: block.bytes, start: block.bytes.lowerBound))
    }

    /// Records how far `reader` has taken the body.
    mutating func move(_ reader: any FillReader, to position: Int) {
        if let index = readers.firstIndex(where: { $0.reader === reader }) {
            readers[index].position = position
        }
    }

    var slowestPosition: Int {
        readers.isEmpty ? received : readers.reduce(Int.max) { min($0, $1.position) }
    }

    /// Drops chunks no reader needs from memory. With a disk file, only chunks in blocks whose
    /// checksums it has published are dropped (so a late reader always finds a continuous
    /// body, each block of it checkable), keeping the last ``memoryWindow`` bytes for readers
    /// that keep up.
    mutating func trim(_ backing: Backing) {
        guard !backing.keepsWhole else { return }
        let slowest = slowestPosition
        var floor = slowest
        if let diskWrite = backing.diskWrite, !diskWrite.hasFailed || spill != nil {
            floor = min(spillableBytes(backing) ?? 0, max(slowest, received - FillBuffer.memoryWindow))
        } else if let slicedWrite = backing.slicedWrite, !slicedWrite.hasFailed {
            floor = min(slicedWrite.checkableBytes, max(slowest, received - FillBuffer.memoryWindow))
            slicedWrite.release(before: slowest)
        }
        var drop = 0
        var end = firstStart
        while drop < chunks.count, end + chunks[drop].count <= floor {
            end += chunks[drop].count
            drop += 1
        }
        if drop > 0 {
            chunks.removeFirst(drop)
            // The first chunk kept starts where the last dropped ended.
            firstStart = end
            laterStarts.removeFirst(min(drop, laterStarts.count))
        }
    }

    /// The body bytes readable from the disk file, in blocks whose checksums are published,
    /// once a descriptor on it is open.
    mutating func spillableBytes(_ backing: Backing) -> Int? {
        if let slicedWrite = backing.slicedWrite { return slicedWrite.hasFailed ? nil : slicedWrite.checkableBytes }
        guard let diskWrite = backing.diskWrite, !diskWrite.hasFailed || spill != nil else { return nil }
        if spill == nil {
            guard diskWrite.durableBytes.load(ordering: .acquiring) > 0, let file = diskWrite.openForReading() else {
                return nil
            }
            spill = file
            spillWrite = diskWrite
        }
        return diskWrite.checkableBytes.load(ordering: .acquiring)
    }

    /// The readers (by index, ascending) a transfer about to pause for its slowest reader lets
    /// go instead: with no file to fall back on, those ``highWater`` behind, when another
    /// reader keeps up. Empty when the pause holds up no one else (one reader, or all behind).
    func laggards(_ backing: Backing) -> [Int] {
        guard readers.count > 1, waitsForReaders(backing) else { return [] }
        let behind = readers.indices.filter { received - readers[$0].position >= FillBuffer.highWater }
        return behind.count < readers.count ? behind : []
    }

    /// Whether a pause waits for the readers (no disk file to fall back on), not the disk thread.
    func waitsForReaders(_ backing: Backing) -> Bool {
        !backing.keepsWhole && backing.diskWrite?.hasFailed ?? true && backing.slicedWrite?.hasFailed ?? true
    }

    /// Whether the transfer must wait: the slowest reader is far behind and there is no file
    /// to fall back on, or the disk thread is far behind the network.
    /// `writeBacklog`: the bytes received but not yet written by the disk thread past which
    /// it waits for the disk (``writeBacklog(streams:)``).
    func mustPause(_ backing: Backing, writeBacklog: @autoclosure () -> Int) -> Bool {
        if backing.keepsWhole { return false }
        if let diskWrite = backing.diskWrite, !diskWrite.hasFailed {
            return received - diskWrite.durableBytes.load(ordering: .acquiring) >= writeBacklog()
        }
        if let slicedWrite = backing.slicedWrite, !slicedWrite.hasFailed {
            return received - slicedWrite.durableBytes >= writeBacklog()
        }
        guard !readers.isEmpty else { return false }
        return received - slowestPosition >= (paused ? FillBuffer.lowWater : FillBuffer.highWater)
    }
}

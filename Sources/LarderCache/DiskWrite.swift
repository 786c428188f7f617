import Glibc
import LarderIO
import Synchronization

/// One response being written to the disk tier. The body goes to a temporary file as it
/// streams; ``finish()`` fills in the length and checksum and renames the file into place, so an
/// entry is visible only when complete. All file work happens on the cache's writer thread, in
/// the order the calls were made; the calling event loop never blocks.
///
/// State: `state` is touched only by writer-thread jobs (the mutex makes that checkable);
/// `durableBytes` is published for readers that follow the file while it grows.
public final class DiskWrite: Sendable {
    let cache: DiskCache
    let key: CacheKey
    let name: EntryName
    let vary: [String: String]
    /// When the response arrived: the write gives way to one that arrived later.
    private let responseTime: Double
    private let maxBytes: Int64
    /// When the fetch began: a purge or ban since that covers `key` keeps it out of the index.
    private let stamp: InvalidationLog.Stamp?
    /// Called on the writer thread once the entry is in place and indexed.
    private let whenIndexed: (@Sendable () -> Void)?
    /// The temporary file while the body streams.
    public let temporaryPath: String
    /// Where the body starts in the file.
    public let bodyOffset: Int64
    /// The head section's checksum, for the final preamble.
    private let headChecksum: UInt64
    /// Body bytes written to the file so far.
    public let durableBytes = Atomic<Int>(0)
    private let failed = Atomic<Bool>(false)
    /// The checksums of the blocks written so far: each whole block's once it is written, the
    /// last, short one's once the body is complete. Computed from the bytes the fill handed
    /// over, never from the file, so a reader that fell behind what the fill keeps in memory
    /// reads a whole block from the file, checks it against this and sends only the bytes it
    /// checked (``readBlock(_:range:from:completion:)``): the file is never sent as it is.
    /// Its own lock: `state`'s is held across file calls, which an event loop must not wait for.
    private let published = Mutex<[UInt64]>([])
    /// Body bytes those checksums cover: whole blocks, or the whole body once complete.
    public let checkableBytes = Atomic<Int>(0)
    /// A block read back failed its check: the entry is never stored (or is dropped).
    private let spoiled = Atomic<Bool>(false)
    /// The file's device and inode, set as it is renamed into place: what a descriptor
    /// ``openForReading()`` opens by the entry's name must be, since by then that name may hold
    /// another write's file (the object stored again) or none, and what a later
    /// ``spoil(block:)`` drops if the name still holds it. Its own lock, as `published`.
    private let renamedFile = Mutex<(device: UInt64, inode: UInt64)?>(nil)

    private struct State {
        var fd: Int32 = -1
        var written: Int64 = 0
        var checksum = BodyChecksum()
        var blocks = BlockChecksums()
        var done = false
    }

    private let state = Locked(State())

    init(
        cache: DiskCache, key: CacheKey, name: EntryName, head: DiskEntryFormat.Head, maxBytes: Int64, stamp: InvalidationLog.Stamp?,
        whenIndexed: (@Sendable () -> Void)? = nil
    ) {
        self.cache = cache
        self.whenIndexed = whenIndexed
        self.key = key
        self.name = name
        vary = head.vary
        responseTime = head.responseTime
        self.maxBytes = maxBytes
        self.stamp = stamp
        temporaryPath = cache.temporaryPath(name, suffix: "tmp")
        // Lengths zero until `finish` rewrites the preamble in place; a body streamed now is
        // checksummed in the current format, whatever head it came with.
        var head = head
        head.version = DiskEntryFormat.version
        let entryHead = DiskEntryFormat.entryHead(head, bodyLength: 0, bodyChecksum: 0)
        bodyOffset = Int64(entryHead.count)
        headChecksum = DiskEntryFormat.headChecksum(of: entryHead[DiskEntryFormat.preambleLength...])
        cache.writer.submit { [self] in
            run { state throws(SystemError) in
                state.fd = try FileSystem.createExclusive(temporaryPath)
                try FileSystem.writeAll(state.fd, entryHead)
            }
        }
    }

    /// A read-only descriptor on the file being written, for clients that have fallen behind
    /// the body still held in memory: they read what is durable (``durableBytes``) from it.
    /// Opened before any such bytes are dropped from memory, so a later unlink (failure) or
    /// rename (completion) does not take the data away.
    public func openForReading() -> OpenFile? {
        guard !hasFailed else { return nil }
        // The temporary name is this write's alone.
        if let file = try? OpenFile.open(temporaryPath) { return file }
        // Already renamed into place: the name counts only while it holds this very file.
        guard renamedFile.withLock({ $0 }) != nil, let file = try? OpenFile.open(cache.path(forName: name)) else { return nil }
        var info = stat()
        guard (try? Syscall.call("fstat", { fstat(file.fd, &info) })) != nil, isRenamedFile(info) else { return nil }
        return file
    }

    /// Whether `info` describes the file this write renamed into place.
    private func isRenamedFile(_ info: stat) -> Bool {
        guard let renamed = renamedFile.withLock({ $0 }) else { return false }
        return UInt64(info.st_dev) == renamed.device && UInt64(info.st_ino) == renamed.inode
    }

    /// Whether a write error (or the size limit) ended this write.
    public var hasFailed: Bool { failed.load(ordering: .acquiring) }

    /// Appends body bytes.
    public func append(_ chunk: [UInt8]) {
        cache.writer.submit { [self] in
            run { state throws(SystemError) in
                guard state.written + Int64(chunk.count) <= maxBytes else {
                    throw SystemError(call: "write (larger than disk.max_object_bytes)", errno: EFBIG)
                }
                try FileSystem.writeAll(state.fd, chunk)
                state.checksum.update(chunk)
                state.blocks.update(chunk)
                state.written += Int64(chunk.count)
                durableBytes.store(Int(state.written), ordering: .releasing)
                publish(state.blocks, upTo: state.blocks.completedBlocks * DiskEntryFormat.blockSize)
            }
        }
    }

    /// Completes the entry: writes the block table, length and checksum, checks the file size, renames it into
    /// place and indexes it. `completion` (on the writer thread) says whether it was stored. A
    /// purge or ban of the key since the fetch began (``InvalidationLog``), or a response to
    /// another fill of the same variant that arrived later and is stored by now, leaves the
    /// file unnamed: readers that opened it keep their bytes, nothing is stored.
    public func finish(expectedLength: Int, completion: (@Sendable (Bool) -> Void)? = nil) {
        cache.writer.submit { [self] in
            var dropped = false
            let stored = run { state throws(SystemError) in
                guard state.written == Int64(expectedLength) else {
                    throw SystemError(call: "finish (body length mismatch)", errno: EIO)
                }
                let preamble = DiskEntryFormat.preamble(
                    bodyLength: state.written, bodyChecksum: state.checksum.value, headChecksum: headChecksum,
                    headLength: Int(bodyOffset) - DiskEntryFormat.preambleLength)
                // The block table after the body, then the preamble that says where it starts.
                publish(state.blocks, upTo: Int(state.written))
                let table = state.blocks.table
                if !table.isEmpty { try FileSystem.writeAll(state.fd, table) }
                try FileSystem.writeAll(state.fd, preamble, at: 0)
                var info = stat()
                _ = try Syscall.call("fstat") { fstat(state.fd, &info) }
                let size = Int64(info.st_size)
                guard size == bodyOffset + state.written + Int64(table.count) else {
                    throw SystemError(call: "fstat (size mismatch)", errno: EIO)
                }
                Syscall.close(state.fd)
                state.fd = -1
                state.done = true
                let entry = DiskIndex.Entry(
                    key: key, vary: vary, name: name, size: size, responseTime: responseTime, bodyTime: responseTime)
                let purged = !cache.invalidations.allows(key, since: stamp)
                if purged || cache.index.withLock({ $0.holdsLater(named: name, than: responseTime) }) {
                    if !purged { cache.superseded(entry) }
                    dropped = true
                    try? FileSystem.remove(temporaryPath)
                    return
                }
                renamedFile.withLock { $0 = (UInt64(info.st_dev), UInt64(info.st_ino)) }
                try FileSystem.renameCreatingDirectory(temporaryPath, cache.path(forName: name))
                dropped = !cache.didStore(entry, stamp: stamp)
            }
            if stored && !dropped { whenIndexed?() }
            completion?(stored && !dropped)
        }
    }

    /// Publishes the checksums of the blocks `blocks` has for body bytes up to `end` (writer
    /// thread, after those bytes are written): whole blocks, and the short last one at the end.
    private func publish(_ blocks: BlockChecksums, upTo end: Int) {
        guard end > checkableBytes.load(ordering: .relaxed) else { return }
        published.withLock { published in
            while published.count < blocks.completedBlocks { published.append(blocks.checksum(ofBlock: published.count)) }
            if published.count * DiskEntryFormat.blockSize < end, let last = blocks.partialBlockChecksum {
                published.append(last)
            }
        }
        checkableBytes.store(end, ordering: .releasing)
    }

    /// The block holding body byte `position`, when its checksum is published: its index and
    /// the body bytes it spans.
    public func checkableBlock(containing position: Int) -> (index: Int, bytes: Range<Int>)? {
        let end = checkableBytes.load(ordering: .acquiring)
        guard position >= 0, position < end else { return nil }
        let block = position / DiskEntryFormat.blockSize
        let start = block * DiskEntryFormat.blockSize
        return (block, start..<min(start + DiskEntryFormat.blockSize, end))
    }

    /// Reads block `block` (body bytes `range`, from ``checkableBlock(containing:)``) from
    /// `file`, a descriptor on this write's file (``openForReading()``), on the cache's block
    /// reader thread, and checks it against its published checksum; `completion` (called there)
    /// receives the checked bytes. A block that fails spoils the entry (``spoil(block:)``).
    public func readBlock(
        _ block: Int, range: Range<Int>, from file: OpenFile, completion: @escaping @Sendable (DiskCache.BlockRead) -> Void
    ) {
        cache.blockReader.submit { [self] in
            let expected = published.withLock { block < $0.count ? $0[block] : nil }
            let bytes = try? FileSystem.read(file.fd, at: bodyOffset + Int64(range.lowerBound), count: range.count)
            guard let expected, let bytes, bytes.count == range.count,
                (try? DiskEntryFormat.checkBlock(bytes, block: block, expected: expected)) != nil
            else {
                spoil(block: block)
                completion(.failed)
                return
            }
            completion(.checked(bytes))
        }
    }

    /// The file does not hold what was written to it (a disk that lies, a stray write): the
    /// entry is not stored, or, if it was stored by now and its name still holds that very
    /// file, it is dropped. Counted as one corruption however many readers find it.
    func spoil(block: Int) {
        guard !spoiled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let problem = DiskEntryFormat.Problem.blockChecksumMismatch(block: block)
        cache.writer.submit { [self] in
            state.withLock { state in
                if !state.done {
                    if state.fd >= 0 { Syscall.close(state.fd) }
                    state.fd = -1
                    state.done = true
                    failed.store(true, ordering: .releasing)
                    try? FileSystem.remove(temporaryPath)
                }
            }
            var info = stat()
            if stat(cache.path(forName: name), &info) == 0, isRenamedFile(info),
                let entry = cache.index.withLock({ $0.entry(named: name) }), entry.segment == 0
            {
                cache.discard(entry, after: problem)  // counts and logs it
                return
            }
            cache.corruptions.add(1)
            cache.logger.warning(
                "a disk cache entry being written failed its check while being sent; it is not stored",
                metadata: ["file": "\(temporaryPath)", "reason": "\(problem)"])
        }
    }

    /// Abandons the entry (the response failed or was cut short): the temporary file goes away.
    public func abort() {
        cache.writer.submit { [self] in
            state.withLock { state in
                if state.fd >= 0 { Syscall.close(state.fd) }
                state.fd = -1
                state.done = true
            }
            failed.store(true, ordering: .releasing)
            try? FileSystem.remove(temporaryPath)
        }
    }

    /// Runs one step on the writer thread; the first error abandons the entry and is reported
    /// to the cache (which degrades to memory-only storing for a while).
    @discardableResult
    private func run(_ step: (inout State) throws(SystemError) -> Void) -> Bool {
        state.withLock { state in
            guard !state.done, !failed.load(ordering: .relaxed) else { return false }
            do throws(SystemError) {
                try step(&state)
                return true
            } catch {
                if state.fd >= 0 { Syscall.close(state.fd) }
                state.fd = -1
                state.done = true
                failed.store(true, ordering: .releasing)
                try? FileSystem.remove(temporaryPath)
                if error.errno == EFBIG && error.call.hasPrefix("write (") {
                    return false  // over the size limit: not a disk fault
                }
                cache.writeFailed(error)
                return false
            }
        }
    }
}

extension DiskWrite {
    /// A block of a write's body that a reader behind the fill's memory window takes from the
    /// file: read whole and checked against the checksum the write published before any of it
    /// is sent (DESIGN.md: every byte served from disk is checked first).
    public struct ReadableBlock: Sendable {
        public let write: DiskWrite
        /// A descriptor on the write's file, opened before any of its bytes left memory.
        public let file: OpenFile
        /// The block's index in the write's body, and the body bytes it spans there.
        public let index: Int
        public let bytes: Range<Int>
        /// The fill's body position of the block's first byte (a slice's write starts at its
        /// slice).
        public let start: Int

        public init(write: DiskWrite, file: OpenFile, index: Int, bytes: Range<Int>, start: Int) {
            self.write = write
            self.file = file
            self.index = index
            self.bytes = bytes
            self.start = start
        }
    }
}

import Glibc
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// Writing: entries streamed or stored whole, as segment records or files of their own, and
/// indexed once complete.
extension DiskCache {
    /// Starts storing a response whose head is known; nil when the disk tier is refusing
    /// writes after an error, or the announced length is over `max_object_bytes`. It is not
    /// indexed when a purge or ban since `stamp` covers `key` (``InvalidationLog``).
    /// `whenIndexed` runs on the writer thread once it is.
    public func beginWrite(
        key: CacheKey, head: DiskEntryFormat.Head, expectedLength: Int?, stamp: InvalidationLog.Stamp? = nil,
        whenIndexed: (@Sendable () -> Void)? = nil
    ) -> DiskWrite? {
        guard !isDegraded else { return nil }
        let maxObject = limits.withLock { $0.maxObjectBytes }
        if let expectedLength, Int64(expectedLength) > maxObject { return nil }
        let name = DiskCache.entryName(key: key, vary: head.vary)
        return DiskWrite(cache: self, key: key, name: name, head: head, maxBytes: maxObject, stamp: stamp, whenIndexed: whenIndexed)
    }

    /// Stores a complete response whose body is in memory, in one writer job (temporary file,
    /// then rename), for bodies small enough to have been kept whole. With `wakeWriter` false
    /// the job waits for the next ``wakeWriter()``: an event loop stores every miss of one
    /// epoll batch and wakes the writer once (on one core each wake-up is a context switch).
    /// `body` is the body's bytes when the caller has them at hand (the stored response may keep
    /// them in an anonymous memory file); by default they are taken from `stored`. `head`
    /// describes `stored`: the entry's header fields are `stored`'s, copied in wire form. Not
    /// indexed when a purge or ban since `stamp` covers it. A body over `max_object_bytes` is
    /// not stored, and the variant's older entry goes (``removeOlder(than:vary:)``).
    public func store(
        _ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head, wakeWriter: Bool = true,
        stamp: InvalidationLog.Stamp? = nil
    ) {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard let body = body ?? stored.memoryBody, !isDegraded else { return }
        guard Int64(body.count) <= limits.withLock({ $0.maxObjectBytes }) else {
            removeOlder(than: stored, vary: head.vary)
            return
        }
        let name = DiskCache.entryName(key: stored.key, vary: head.vary)
        let key = stored.key
        let wireFields = stored.wireFields
        writer.submit(wake: wakeWriter) { [self] in
            writeEntry(key: key, name: name, head: head, wireFields: wireFields, body: body, stamp: stamp)
        }
    }

    /// Stores a small complete response on the calling thread: ``storeInline(_:budgetNanos:)``
    /// for one response. Returns false, doing nothing, when the entry must go to
    /// ``store(_:body:head:wakeWriter:stamp:)`` instead. `body` and `head` as for that method.
    public func storeInline(_ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head) -> Bool {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard let body = body ?? stored.memoryBody else { return false }
        return storeInline([TieredCache.PendingStore(response: stored, body: body, head: head)], budgetNanos: .max).isEmpty
    }

    /// Stores small complete responses on the calling thread (an event loop, after its batch
    /// of responses went out), as nginx does: on one core, handing a 1 KiB entry to the writer
    /// thread costs more in wake-ups and context switches than appending it to a segment. The
    /// records of a batch go to one segment in one `pwrite` (up to ``inlineChunkBytes``), so a
    /// loop makes one file call per epoll batch, not one per miss.
    ///
    /// Returns the stores left for ``store(_:body:head:wakeWriter:)``: bodies over
    /// ``inlineLimit``; every store while an inline write was slow recently (one write over
    /// ``slowInlineWrite`` sends every write to the writer for ``inlineBackoff``, so a slow or
    /// stalled disk costs the loop one stall, not one per miss); and what remains once
    /// `budgetNanos` have passed. (Deletions queued on the writer cannot undo an
    /// inline store: they name the file or record they remove, and a record appended now is
    /// neither.) A failed write is dropped with the rest of its batch: the tier then refuses
    /// writes for a while (``writeFailed(_:)``).
    public func storeInline(_ stores: [TieredCache.PendingStore], budgetNanos: UInt64) -> [TieredCache.PendingStore] {
        guard Clocks.monotonicNanos() >= inlineAllowedAfter.load(ordering: .relaxed), !isDegraded else { return stores }
        let maxObject = limits.withLock { $0.maxObjectBytes }
        var left: [TieredCache.PendingStore] = []
        var records: [InlineRecord] = []
        records.reserveCapacity(stores.count)
        stores.withUnsafeBufferPointer { stores in
            for position in stores.indices {
                assert(stores[position].head.headers == stores[position].response.headers, "the entry's fields are taken from stored")
                let length = stores[position].body.count
                guard length <= DiskCache.inlineLimit, Int64(length) <= maxObject else {
                    left.append(stores[position])
                    continue
                }
                records.append(InlineRecord(stores.baseAddress! + position, source: position))
            }
        }
        let started = Clocks.monotonicNanos()
        var next = records.startIndex
        while next < records.endIndex {
            guard let (written, nanos) = appendRecords(records[next...]) else { break }
            next += written
            // Only the file calls count: indexing is CPU work, and a slow disk is what must not
            // stall a loop.
            if nanos > slowInlineWrite.load(ordering: .relaxed) {
                inlineAllowedAfter.store(Clocks.monotonicNanos() + DiskCache.inlineBackoff, ordering: .relaxed)
                logger.notice(
                    "slow disk cache write; writing on the disk thread for 30s",
                    metadata: ["milliseconds": "\(nanos / 1_000_000)", "directory": "\(directory)"])
                break
            }
            if Clocks.monotonicNanos() &- started >= budgetNanos { break }
        }
        if next < records.endIndex, !isDegraded {
            left.append(contentsOf: records[next...].map { stores[$0.source] })
        }
        if index.withLock({ $0.physicalBytes }) > limits.withLock({ $0.maxBytes }) {
            writer.submit { [self] in evictIfNeeded() }
        }
        return left
    }

    /// A response's record, ready to append: its index entry (segment and offset to come), its
    /// preamble and head, and its body.
    struct InlineRecord {
        var entry: DiskIndex.Entry
        let head: [UInt8]
        let body: [UInt8]
        /// Its position in the batch it came from.
        let source: Int
        let stamp: InvalidationLog.Stamp?

        /// The record of the store at `store`, read in place: handed over by value (even
        /// borrowed) from its batch, each store was first copied, each of its references retained.
        init(_ store: UnsafePointer<TieredCache.PendingStore>, source: Int) {
            var checksum = BodyChecksum(entryVersion: store.pointee.head.version)
            checksum.update(store.pointee.body)
            head = DiskEntryFormat.entryHead(
                store.pointee.head, wireFields: store.pointee.response.wireFields, bodyLength: Int64(store.pointee.body.count),
                bodyChecksum: checksum.value)
            body = store.pointee.body
            entry = DiskIndex.Entry(
                key: store.pointee.response.key, vary: store.pointee.head.vary,
                name: DiskCache.entryName(key: store.pointee.response.key, vary: store.pointee.head.vary),
                size: Int64(head.count + store.pointee.body.count), responseTime: store.pointee.head.responseTime,
                bodyTime: store.pointee.head.bodyArrival)
            self.source = source
            stamp = store.pointee.stamp
        }
    }

    /// At most this many bytes of records go to a segment in one write.
    static let inlineChunkBytes = 1 << 20

    /// Appends the first records of `records` to one segment with one write — as many as fit
    /// under the segment's limit and ``inlineChunkBytes``, at least one — and indexes them under
    /// one lock; the records they replace are freed on the writer thread. Returns how many were
    /// written and the time the file calls took; nil when the write failed.
    func appendRecords(_ records: ArraySlice<InlineRecord>) -> (count: Int, fileNanos: UInt64)? {
        let start = Clocks.monotonicNanos()
        let limit = DiskCache.segmentLimit(maxBytes: limits.withLock { $0.maxBytes })
        var appender: DiskSegments.Appender
        do throws(SystemError) {
            appender = try segments.take(entries: entriesDirectoryFD.load(ordering: .acquiring))
        } catch {
            writeFailed(error)
            return nil
        }
        // A record goes in while the segment is under its limit: the same rule as one append
        // at a time (a segment is sealed once an append takes it to the limit).
        let base = appender.size
        var length = 0
        var end = records.startIndex
        while end < records.endIndex, base + Int64(length) < limit {
            let size = records[end].head.count + records[end].body.count
            guard length == 0 || length + size <= DiskCache.inlineChunkBytes else { break }
            length += size
            end += 1
        }
        do throws(SystemError) {
            if end - records.startIndex == 1 {
                _ = try segments.append(&appender, head: records[records.startIndex].head, body: records[records.startIndex].body)
            } else {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(length)
                for record in records[..<end] {
                    bytes.append(contentsOf: record.head)
                    bytes.append(contentsOf: record.body)
                }
                _ = try segments.append(&appender, bytes: bytes)
            }
        } catch {
            let failed = appender
            index.withLock { $0.recordSegment(failed.id, size: failed.size, sealed: true) }
            writeFailed(error)
            return nil
        }
        let fileNanos = Clocks.monotonicNanos() - start
        let sealed = appender.size >= limit
        let filled = appender
        let replaced = index.withLock { index in
            index.recordSegment(filled.id, size: filled.size, sealed: sealed)
            var offset = base
            var replaced: [DiskIndex.Entry] = []
            for position in records.startIndex..<end {
                var entry = records[position].entry
                entry.segment = filled.id
                entry.offset = offset
                offset += entry.size
                if !invalidations.allows(entry.key, since: records[position].stamp) {
                    replaced.append(entry)  // purged since its fetch began: its record is freed
                } else if let old = index.insert(consume entry) {
                    replaced.append(old)
                }
            }
            return replaced
        }
        segments.giveBack(appender, sealed: sealed)
        let count = end - records.startIndex
        writesCompleted.add(count)
        for entry in replaced where entry.serial == 0 { superseded(entry) }
        if !replaced.isEmpty { writer.submit { [self] in dispose(replaced) } }
        return (count, fileNanos)
    }

    /// Bodies up to this size are records in segment files, and may be written by
    /// ``storeInline(_:budgetNanos:)``; larger ones get a file each.
    public static let inlineLimit = 64 << 10
    /// How long writes stay on the writer thread after a slow inline write.
    static let inlineBackoff: UInt64 = 30_000_000_000

    /// The size at which a segment is sealed and a new one started: 1/64 of `disk.max_bytes`
    /// (so compaction, which copies at most half a segment, stays a small share of the tier),
    /// between 256 KiB and 32 MiB (at most a few hundred segment descriptors open).
    static func segmentLimit(maxBytes: Int64) -> Int64 {
        min(32 << 20, max(256 << 10, maxBytes / 64))
    }

    /// About how many segment descriptors a tier of `maxBytes` holds open: a full tier's
    /// segments (at least half live each, or compaction takes them), plus the open ones.
    public static func segmentDescriptors(maxBytes: Int64) -> Int {
        Int(2 * maxBytes / segmentLimit(maxBytes: maxBytes)) + 8
    }

    /// Writes an entry and indexes it, on the writer thread: a record appended to a segment up
    /// to ``inlineLimit``, else a file; then evicts if the tier is over its limit. Returns the
    /// time the file calls took, or nil when the entry could not be stored. Not indexed when a
    /// purge or ban since `stamp` covers it.
    @discardableResult
    func writeEntry(
        key: CacheKey, name: EntryName, head: DiskEntryFormat.Head, wireFields: ArraySlice<UInt8>?, body: [UInt8],
        stamp: InvalidationLog.Stamp? = nil
    ) -> UInt64? {
        var checksum = BodyChecksum(entryVersion: head.version)
        checksum.update(body)
        let entryHead = DiskEntryFormat.entryHead(
            head, wireFields: wireFields, bodyLength: Int64(body.count), bodyChecksum: checksum.value)
        // Empty up to one block (every segment record): only larger bodies have a table, and a
        // body of one block is not checksummed a second time to learn so.
        let blocked = head.version >= DiskEntryFormat.firstBlockedVersion && body.count > DiskEntryFormat.blockSize
        let table = blocked ? DiskEntryFormat.blockTable(of: body, version: head.version) : []
        let entry = DiskIndex.Entry(
            key: key, vary: head.vary, name: name, size: Int64(entryHead.count + body.count + table.count),
            responseTime: head.responseTime, bodyTime: head.bodyArrival)
        let elapsed: UInt64?
        if body.count <= DiskCache.inlineLimit {
            elapsed = appendRecord(entry, head: entryHead, body: body, stamp: stamp)
        } else {
            elapsed = writeFile(entry, head: entryHead, body: body, table: table, stamp: stamp)
        }
        guard let elapsed else { return nil }
        evictIfNeeded()
        return elapsed
    }

    /// Appends `entry` as a record (``appendToSegment(head:body:place:)``) and indexes it, on the
    /// writer thread; the record it replaces, if any, is freed. Returns the time the file calls
    /// took, nil when the record could not be stored.
    /// Not indexed (its record freed) when a purge or ban since `stamp` covers it, or, for a
    /// `refresh`, when its name no longer holds the body refreshed (``DiskIndex/insert(refresh:)``).
    @discardableResult
    func appendRecord(
        _ entry: DiskIndex.Entry, head: [UInt8], body: [UInt8], stamp: InvalidationLog.Stamp? = nil, refresh: Bool = false
    ) -> UInt64? {
        let replaced: DiskIndex.Entry?
        let fileNanos: UInt64
        do throws(SystemError) {
            (replaced, fileNanos) = try appendToSegment(head: head, body: body) { index, segment, offset in
                var record = entry
                record.segment = segment
                record.offset = offset
                if !invalidations.allows(entry.key, since: stamp) { return record }
                return refresh ? index.insert(refresh: record) : index.insert(record)
            }
        } catch {
            writeFailed(error)
            return nil
        }
        writesCompleted.add(1)
        if let replaced {
            if replaced.serial == 0 { superseded(replaced) }
            dispose([replaced])
        }
        return fileNanos
    }

    /// A store the index refused: its name holds a response that arrived later
    /// (``whenSuperseded``).
    func superseded(_ entry: DiskIndex.Entry) {
        whenSuperseded.withLock { $0 }?(entry)
    }

    /// Appends one record — `head` (preamble and head, or a whole record) then `body` — to a
    /// segment held for this call alone, and lets `place` index it, under the index lock, at
    /// the segment and offset it got, before the segment goes back to the pool (so the index's
    /// segment sizes only grow). A segment whose append failed is sealed: a disk that failed
    /// once is not trusted with it. Returns `place`'s result and the time the file calls took.
    func appendToSegment<Placed: Sendable>(
        head: [UInt8], body: [UInt8], place: (inout DiskIndex, _ segment: UInt32, _ offset: Int64) -> Placed
    ) throws(SystemError) -> (placed: Placed, fileNanos: UInt64) {
        let start = Clocks.monotonicNanos()
        var appender = try segments.take(entries: entriesDirectoryFD.load(ordering: .acquiring))
        let offset: Int64
        do {
            offset = try segments.append(&appender, head: head, body: body)
        } catch {
            let failed = appender
            index.withLock { $0.recordSegment(failed.id, size: failed.size, sealed: true) }
            throw error
        }
        let fileNanos = Clocks.monotonicNanos() - start
        let sealed = appender.size >= DiskCache.segmentLimit(maxBytes: limits.withLock { $0.maxBytes })
        let filled = appender
        let placed = index.withLock { index in
            index.recordSegment(filled.id, size: filled.size, sealed: sealed)
            return place(&index, filled.id, offset)
        }
        segments.giveBack(appender, sealed: sealed)
        return (placed, fileNanos)
    }

    /// Writes `entry` as a file (writer thread). A new name is written in place, with one
    /// `writev` (then `table`, a body's block table, if it has one): create, write, close. A crash in between leaves a file whose size does not
    /// match its preamble, which the start-up scan deletes (DISK-FORMAT.md), and no lookup reads
    /// it meanwhile because the index learns of it only once it is complete (while the start-up
    /// scan runs, lookups also find entries by file name, so until then every entry goes through
    /// `tmp/`). That saves the rename, the most expensive of the file calls on tmpfs. A name that
    /// exists (a replaced response) is written to `tmp/` and renamed over it, so that clients
    /// still sending the old file keep their bytes. Returns the time the file calls took, nil
    /// when the file could not be stored. Nothing is written when a purge or ban since `stamp`
    /// covers it (a file renamed over its name would replace a newer entry's).
    func writeFile(
        _ entry: DiskIndex.Entry, head: [UInt8], body: [UInt8], table: [UInt8], stamp: InvalidationLog.Stamp? = nil
    ) -> UInt64? {
        if !invalidations.allows(entry.key, since: stamp) { return 0 }
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        let relative = relativePath(forName: entry.name)
        let start = Clocks.monotonicNanos()
        do throws(SystemError) {
            if isIndexComplete, let fd = try DiskCache.createNew(at: entries, relative) {
                defer { Syscall.close(fd) }
                do {
                    try FileSystem.writeAll(fd, head, body)
                    if !table.isEmpty { try FileSystem.writeAll(fd, table) }
                } catch {
                    try? FileSystem.remove(at: entries, relative)
                    throw error
                }
            } else {
                // Renamed over the name: not over a response that arrived later.
                if index.withLock({ $0.holdsLater(named: entry.name, than: entry.responseTime) }) {
                    superseded(entry)
                    return 0
                }
                let temporary = temporaryName(entry.name, suffix: "tmp")
                do {
                    let fd = try FileSystem.createExclusive(at: temporaryDirectoryFD, temporary)
                    defer { Syscall.close(fd) }
                    try FileSystem.writeAll(fd, head, body)
                    if !table.isEmpty { try FileSystem.writeAll(fd, table) }
                    try FileSystem.renameCreatingDirectory(at: temporaryDirectoryFD, temporary, to: entries, relative)
                } catch {
                    try? FileSystem.remove(at: temporaryDirectoryFD, temporary)
                    throw error
                }
            }
        } catch {
            writeFailed(error)
            return nil
        }
        let elapsed = Clocks.monotonicNanos() - start
        didStore(entry, evict: false, stamp: stamp)
        return elapsed
    }

    /// Creates `relative` (and its directories) for writing; nil when it exists already.
    static func createNew(at entries: Int32, _ relative: String) throws(SystemError) -> Int32? {
        do {
            return try FileSystem.createExclusiveCreatingDirectory(at: entries, relative)
        } catch  where error.errno == EEXIST {
            return nil
        }
    }

    /// Wakes the writer for jobs queued with `wakeWriter: false`.
    public func wakeWriter() { writer.wake() }

    /// A name in `tmp/` that no other write uses: the entry's name, this process and a counter
    /// (start-up empties `tmp/`, so names from a crashed run are gone).
    func temporaryName(_ name: EntryName, suffix: String) -> String {
        let sequence = temporarySequence.add(1, ordering: .relaxed).newValue
        var temporary = ""
        temporary.reserveCapacity(32 + suffix.utf8.count + 32)
        temporary += name.description
        temporary += "."
        temporary += String(DiskCache.processID)
        temporary += "."
        temporary += String(sequence)
        temporary += "."
        temporary += suffix
        return temporary
    }

    /// ``temporaryName(_:suffix:)`` as an absolute path.
    func temporaryPath(_ name: EntryName, suffix: String) -> String {
        directory + "/tmp/" + temporaryName(name, suffix: suffix)
    }

    static let processID = getpid()

    /// Indexes an entry file once it is in place (writer thread: a finished ``DiskWrite``, or
    /// ``writeFile(_:head:body:table:stamp:)``), and frees the record it replaces; returns
    /// whether it was indexed. When a purge or ban since `stamp` covers it (recorded after the
    /// caller's own check, before this lock), the file goes instead, and whatever the index holds
    /// under its name: that entry's file is the one this file was renamed over. When the name
    /// holds a response that arrived later (``DiskIndex/insert(_:capped:)``) the file goes too:
    /// the caller checked for such a file before renaming over the name
    /// (``DiskIndex/holdsLater(named:than:)``), so what the index holds is a record a loop
    /// appended since; and so for a `refresh` whose name holds another body by now
    /// (``DiskIndex/insert(refresh:)``; its caller checked that before renaming, too).
    @discardableResult
    func didStore(_ entry: DiskIndex.Entry, evict: Bool = true, stamp: InvalidationLog.Stamp? = nil, refresh: Bool = false) -> Bool {
        let name = entry.name
        let (stored, replaced) = index.withLock { index -> (Bool, DiskIndex.Entry?) in
            if !invalidations.allows(entry.key, since: stamp) { return (false, index.remove(named: name)) }
            let replaced = refresh ? index.insert(refresh: entry) : index.insert(entry)
            // Not indexed: `entry` came back (its serial is not one the index gave out).
            if let replaced, replaced.serial == 0 { return (false, nil) }
            return (true, replaced)
        }
        if !stored, invalidations.allows(entry.key, since: stamp) { superseded(entry) }
        guard stored else {
            dispose((replaced.map { [$0] } ?? []) + [DiskCache.unindexedFile(name)])
            return false
        }
        writesCompleted.add(1)
        if let replaced { dispose([replaced]) }
        keepOpen(name, size: entry.size)
        if evict { evictIfNeeded() }
        return true
    }

    /// Keeps the entry file `name` (a record of `size` bytes) open (writer thread, once it is
    /// in place) for the hits that follow, which the loops then serve without opening it; its
    /// inode is in memory now. A descriptor kept for the name before held the file this one
    /// replaced.
    func keepOpen(_ name: EntryName, size: Int64) {
        guard openFiles.capacity > 0, DiskCache.readOnLoop(recordSize: size) else { return openFiles.forget(name) }
        if let file = try? OpenFile.open(at: entriesDirectoryFD.load(ordering: .acquiring), relativePath(forName: name)) {
            openFiles.keep(file, named: name)
        } else {
            openFiles.forget(name)
        }
    }

    /// Whether a message last logged at `stamp` may be logged again (at most every 10 s), and
    /// if so, `stamp` set to now: repeated disk failures say so once, not per request.
    static func isLogDue(_ stamp: borrowing Atomic<UInt64>) -> Bool {
        let now = Clocks.monotonicNanos()
        let last = stamp.load(ordering: .relaxed)
        guard last == 0 || now - last > 10_000_000_000 else { return false }
        stamp.store(now, ordering: .relaxed)
        return true
    }

    /// Records a failed write: the tier stops taking writes for a while and says so once.
    func writeFailed(_ error: SystemError) {
        writeErrors.add(1)
        degradedUntil.store(Clocks.monotonicNanos() + 30_000_000_000, ordering: .releasing)
        if DiskCache.isLogDue(lastErrorLog) {
            logger.error(
                "disk cache write failed; storing in memory only for 30s",
                metadata: ["error": "\(error)", "directory": "\(directory)"])
        }
    }

    public var isDegraded: Bool {
        Clocks.monotonicNanos() < degradedUntil.load(ordering: .acquiring)
    }
}

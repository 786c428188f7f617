import Glibc
import LarderHTTP
import LarderIO
import Logging

/// Lookups on the event loops, and the checks and reads behind them on the reader thread:
/// heads, lengths and checksums before anything is served (DISK-FORMAT.md, "Life of an entry").
extension DiskCache {
    // MARK: Lookup (event loop)

    /// What a lookup found.
    public enum Lookup: Sendable {
        case miss
        /// A usable response: its body in memory, checked; or a file range of a body over one
        /// block, whose head is checked and whose blocks must each be read and checked with
        /// ``readBlock(of:block:completion:)`` before they are sent.
        case hit(StoredResponse)
        /// An entry whose body must be read and checked whole first, off the event loop: one
        /// too large to check on the loop (a body of at most a block), one whose file no loop
        /// holds open, or one the start-up scan has not indexed yet. Call
        /// ``verify(_:key:completion:)``.
        case unverified(EntryName)
    }

    /// Records up to this size (preamble, head and body) are read whole and their body checked
    /// on every read, and served from the very bytes checked, so damage done while the daemon
    /// runs is never served. Those bytes stay the array they were read into: copying them into
    /// a memory file to send them once would cost more than the send (the memory tier moves
    /// them into one if it keeps them and they are hit again, ``TieredCache``). Larger ones
    /// are read and checked a block at a time as they are sent (``readBlock(of:block:completion:)``),
    /// and walked by the background scrub (`disk.scrub_rate`) for damage nobody reads. 1 MiB:
    /// reading and checking one costs about as much as serving it (docs/PERFORMANCE.md,
    /// "Design choices").
    public static let verifyEveryReadMax: Int64 = 1 << 20
    /// Records up to this size are read and checked on the event loop itself (a segment
    /// record's body is at most 64 KiB) when the page cache holds them, or the kernel cannot
    /// say whether it does; larger ones on the reader thread, unless they are within
    /// ``verifyCachedOnLoopMax``. On a memory-backed file system (``memoryBacked``) every
    /// record up to that size is read on the loop without asking.
    static let verifyOnLoopMax: Int64 = 80 * 1024
    /// Records up to this size are read and checked on the event loop too when the page cache
    /// holds all of them, head and body (``FileSystem/readIfCached(_:at:count:)``): a hit
    /// handed to the reader thread and back costs more CPU in the wake-ups and the second pass
    /// than checking 256 KiB does, and the loop waits for no read (opening the file aside).
    /// Larger ones still go to the reader thread, so one hit holds the loop for at most ~40 µs
    /// (docs/PERFORMANCE.md, "disk hits").
    static let verifyCachedOnLoopMax: Int64 = 256 * 1024

    /// The outcome of ``verify(_:completion:)``.
    public enum Verification: Sendable {
        /// Sound: the response with the checked body in memory, to serve as it is, or with a
        /// body checked block by block as it is sent (its head checked); nil: look up again.
        /// `since`: taken before the check read the index; a promotion of the response to the
        /// memory tier is refused when a purge or ban since covers it (``InvalidationLog``).
        case sound(StoredResponse?, since: InvalidationLog.Stamp? = nil)
        /// Damaged (deleted, counted), gone, or not on disk: look up again, without the
        /// reader thread (``TieredCache/lookup(_:request:checked:)``).
        case dropped
    }

    /// Whether the index holds a response for `stored`'s key more recent than it, that a
    /// request `stored` matches may match too.
    func holdsMoreRecentResponse(than stored: StoredResponse) -> Bool {
        index.withLock { $0.hasEntry(of: stored.key, overlapping: stored.varyValues, moreRecentThan: stored.responseTime) }
    }

    /// Finds a stored response for `key` whose Vary values match `request`. Cheap: an index
    /// probe, then a small pread of the head through a kept descriptor (page cache); the loop
    /// opens no file. While the start-up scan has not reached an entry, it may still be on disk
    /// under its file name (entries without Vary): with `byName`, that name is handed to the
    /// reader thread to open and check (``verify(_:key:completion:)``), as `.unverified`;
    /// without (the reader thread already looked for this request), it is a miss.
    public func lookup(_ key: CacheKey, request: HTTPHeaders, byName: Bool = true) -> Lookup {
        // Read before the index: the scan may index the entry and end between the two reads,
        // and an index read after the scan ended is the whole truth only then.
        let scanned = isIndexComplete
        let candidates = index.withLock { $0.lookup(key) }
        if candidates.isEmpty {
            guard byName, !scanned else { return .miss }
            return .unverified(DiskCache.entryName(key: key, vary: [:]))
        }
        // RFC 9111 §4.1: of several stored responses that match (one without Vary and one
        // with, or two that vary on different fields), the most recent
        // (``StoredResponse/isMoreRecent(_:than:now:)``), not the first in the index's order
        // (the start-up scan lists a key's entries newest first).
        var chosen = -1
        for index in candidates.indices where VaryMatcher.matches(vary: candidates[index].vary, request: request) {
            let time = candidates[index].responseTime
            if chosen < 0 || StoredResponse.isMoreRecent(time, than: candidates[chosen].responseTime, now: Clocks.wallSeconds) {
                chosen = index
            }
        }
        guard chosen >= 0 else { return .miss }
        let entry = candidates[chosen]
        if entry.size <= DiskCache.verifyEveryReadMax {
            let small = entry.size <= DiskCache.verifyOnLoopMax
            guard small || entry.size <= DiskCache.verifyCachedOnLoopMax else { return .unverified(entry.name) }
            // A cold page is a disk read the loop, and every client on it, would wait for:
            // only what the page cache holds is read here, unless the kernel cannot tell (then
            // small records still are, as they always were) or the pages are memory anyway.
            let onlyIfCached = !memoryBacked && (!small || FileSystem.canTellCached)
            do {
                guard let loaded = try loadHeadOnLoop(entry, onlyIfCached: onlyIfCached),
                    let checked = try readChecked(loaded, onlyIfCached: onlyIfCached)
                else { return .unverified(entry.name) }
                guard checked.head.key == key.url else { throw DiskEntryFormat.Problem.keyMismatch }
                return .hit(storedResponse(key: key, head: checked.head, body: .memory(checked.body), serial: entry.serial))
            } catch {
                discard(entry, after: error)
                return .miss
            }
        }
        do {
            let onlyIfCached = !memoryBacked && FileSystem.canTellCached
            guard let loaded = try loadHeadOnLoop(entry, onlyIfCached: onlyIfCached) else { return .unverified(entry.name) }
            guard loaded.head.key == key.url else { throw DiskEntryFormat.Problem.keyMismatch }
            guard DiskEntryFormat.isBlocked(bodyLength: loaded.head.bodyLength, version: loaded.head.version) else {
                // A body of one block behind a large head is read and checked whole; a larger
                // one without block checksums cannot be checked as it is sent.
                guard loaded.head.bodyLength <= Int64(DiskEntryFormat.blockSize) else {
                    throw DiskEntryFormat.Problem.unblockedLargeBody(version: loaded.head.version)
                }
                return .unverified(entry.name)
            }
            return .hit(storedResponse(key: key, loaded: loaded, serial: entry.serial))
        } catch {
            discard(entry, after: error)
            return .miss
        }
    }

    struct LoadedHead {
        let head: DiskEntryFormat.Head
        let file: OpenFile
        let bodyOffset: Int64
        /// Preamble, head and body: the whole file for an entry file.
        let recordLength: Int64
        /// The body's bytes, unchecked, when the head's read took in the whole record.
        var readBody: ArraySlice<UInt8>? = nil
    }

    /// Whether lookups on the loops read records of `recordSize` bytes themselves (a record
    /// read whole there, or a head before blocks), so that keeping its file open serves them:
    /// those between are always read and checked on the reader thread.
    static func readOnLoop(recordSize: Int64) -> Bool {
        recordSize <= verifyCachedOnLoopMax || recordSize > verifyEveryReadMax
    }

    /// Lets go of kept entry files that have no name left (removed or renamed over, by hand or
    /// between a check and its keep), on the writer thread, so that they do not hold their disk
    /// space until they are asked for again: the server asks every few seconds.
    public func forgetRemovedFiles() {
        writer.submit { [openFiles] in openFiles.forgetUnlinked() }
    }

    /// ``loadHead(_:onlyIfCached:)`` on an event loop, which opens no file: an entry file is
    /// read through the descriptor ``openFiles`` keeps for it; nil when there is none (or its
    /// file has been replaced or removed since), for the reader thread to open it.
    func loadHeadOnLoop(_ entry: DiskIndex.Entry, onlyIfCached: Bool) throws -> LoadedHead? {
        guard entry.segment == 0 else { return try loadHead(entry, onlyIfCached: onlyIfCached) }
        guard let file = openFiles.file(named: entry.name) else { return nil }
        let status = try FileSystem.status(of: file.fd)
        guard status.links > 0 else {
            openFiles.forget(entry.name)
            return nil
        }
        return try loadRecord(file, at: 0, length: status.size, inSegment: false, onlyIfCached: onlyIfCached)
    }

    /// Opens an indexed entry — its file, or its record in a segment — and parses its head.
    func loadHead(_ entry: DiskIndex.Entry) throws -> LoadedHead {
        try loadHead(entry, onlyIfCached: false)!
    }

    /// ``loadHead(_:)``; `onlyIfCached`: nil when the head's bytes are not all in the page
    /// cache (``FileSystem/readIfCached(_:at:count:)``), so that a loop does not wait for them.
    func loadHead(_ entry: DiskIndex.Entry, onlyIfCached: Bool) throws -> LoadedHead? {
        guard entry.segment != 0 else { return try loadHead(name: entry.name, onlyIfCached: onlyIfCached) }
        guard let file = segments.file(entry.segment) else {
            throw SystemError(call: "open (segment \(entry.segment))", errno: ENOENT)
        }
        return try loadRecord(file, at: entry.offset, length: entry.size, inSegment: true, onlyIfCached: onlyIfCached)
    }

    /// Opens an entry file and parses its head; checks the file size against the recorded lengths.
    func loadHead(name: EntryName) throws -> LoadedHead {
        try loadHead(name: name, onlyIfCached: false)!
    }

    /// ``loadHead(name:)``; `onlyIfCached` as for ``loadHead(_:onlyIfCached:)``.
    func loadHead(name: EntryName, onlyIfCached: Bool) throws -> LoadedHead? {
        let file = try OpenFile.open(at: entriesDirectoryFD.load(ordering: .acquiring), relativePath(forName: name))
        let fileSize = try FileSystem.size(of: file.fd)
        return try loadRecord(file, at: 0, length: fileSize, inSegment: false, onlyIfCached: onlyIfCached)
    }

    /// Parses the record at `offset` in `file` (an entry file's only one, or one in a segment)
    /// whose length is known to be `length`: a record whose lengths say otherwise is corrupt.
    /// A record freed in its segment since it was indexed is gone (ENOENT), not corrupt.
    func loadRecord(_ file: OpenFile, at offset: Int64, length: Int64, inSegment: Bool) throws -> LoadedHead {
        try loadRecord(file, at: offset, length: length, inSegment: inSegment, onlyIfCached: false)!
    }

    /// ``loadRecord(_:at:length:inSegment:)``; `onlyIfCached`: nil when the head's bytes are
    /// not all in the page cache.
    func loadRecord(_ file: OpenFile, at offset: Int64, length: Int64, inSegment: Bool, onlyIfCached: Bool) throws
        -> LoadedHead?
    {
        func read(_ count: Int) throws -> [UInt8]? {
            try onlyIfCached
                ? FileSystem.readIfCached(file.fd, at: offset, count: count) : FileSystem.read(file.fd, at: offset, count: count)
        }
        guard var prefix = try read(Int(min(length, 4096))) else { return nil }
        let preamble = try DiskEntryFormat.decodePreamble(prefix[...], acceptingFreed: inSegment)
        if preamble.freed { throw SystemError(call: "read (record freed)", errno: ENOENT) }
        guard preamble.recordLength == length else {
            throw DiskEntryFormat.Problem.truncated(expected: preamble.recordLength, actual: length)
        }
        // A read that reached the record's end shows it whole, with no question of the file's
        // size, and holds its body: a small record is then one read (``readChecked(_:onlyIfCached:)``).
        let whole = Int64(prefix.count) == length
        if inSegment, !whole {
            // A segment cut short (by hand, by a full disk, by a crash of another writer) must
            // not be served: the record has to be whole before its head goes out.
            let fileSize = try FileSystem.size(of: file.fd)
            guard fileSize >= offset + length else {
                throw DiskEntryFormat.Problem.truncated(expected: offset + length, actual: fileSize)
            }
        }
        let headEnd = DiskEntryFormat.preambleLength + preamble.headLength
        if prefix.count < headEnd {
            guard let whole = try read(headEnd) else { return nil }
            // The file may have been cut short since its size was taken: a short read, not a
            // slice past its end.
            guard whole.count == headEnd else {
                throw DiskEntryFormat.Problem.truncated(expected: offset + Int64(headEnd), actual: offset + Int64(whole.count))
            }
            prefix = whole
        }
        let head = try DiskEntryFormat.decodeHead(prefix[DiskEntryFormat.preambleLength..<headEnd], preamble: preamble)
        let bodyEnd = headEnd + Int(preamble.bodyLength)
        return LoadedHead(
            head: head, file: file, bodyOffset: offset + Int64(headEnd), recordLength: length,
            readBody: whole && bodyEnd <= prefix.count ? prefix[headEnd..<bodyEnd] : nil)
    }

    /// `serial`: the index entry's it was read from (``StoredResponse/diskSerial``; 0 for a listing).
    func storedResponse(key: CacheKey, loaded: LoadedHead, serial: UInt64 = 0) -> StoredResponse {
        storedResponse(
            key: key, head: loaded.head,
            body: .file(loaded.file, offset: loaded.bodyOffset, length: loaded.head.bodyLength, format: loaded.head.version),
            serial: serial)
    }

    func storedResponse(key: CacheKey, head: DiskEntryFormat.Head, body: StoredResponse.Body, serial: UInt64 = 0) -> StoredResponse {
        StoredResponse.make(
            key: key, url: head.url, status: head.status, reason: head.reason, headers: head.headers, body: body,
            requestTime: head.requestTime, responseTime: head.responseTime, bodyTime: head.bodyTime, varyValues: head.vary,
            diskSerial: serial)
    }

    // MARK: Verification and promotion (reader thread)

    /// Reads a whole record (one read: callers bound its size) and checks its head and body
    /// against their checksums: what is returned is exactly what was checked.
    func readChecked(_ entry: DiskIndex.Entry) throws -> (head: DiskEntryFormat.Head, body: [UInt8]) {
        try readChecked(loadHead(entry))
    }

    /// ``readChecked(_:)`` of a record whose head is read.
    func readChecked(_ loaded: LoadedHead) throws -> (head: DiskEntryFormat.Head, body: [UInt8]) {
        try readChecked(loaded, onlyIfCached: false)!
    }

    /// ``readChecked(_:)`` of a record whose head is read; `onlyIfCached`: nil when the body's
    /// bytes are not all in the page cache (``FileSystem/readIfCached(_:at:count:)``).
    func readChecked(_ loaded: LoadedHead, onlyIfCached: Bool) throws -> (head: DiskEntryFormat.Head, body: [UInt8])? {
        let fd = loaded.file.fd
        let count = Int(loaded.head.bodyLength)
        let body: [UInt8]
        if let readBody = loaded.readBody {
            body = Array(readBody)
        } else {
            let read = onlyIfCached ? try FileSystem.readIfCached(fd, at: loaded.bodyOffset, count: count) : nil
            if onlyIfCached && read == nil { return nil }
            body = try read ?? FileSystem.read(fd, at: loaded.bodyOffset, count: count)
        }
        guard body.count == Int(loaded.head.bodyLength) else {
            throw DiskEntryFormat.Problem.truncated(expected: loaded.head.bodyLength, actual: Int64(body.count))
        }
        var checksum = BodyChecksum(entryVersion: loaded.head.version)
        checksum.update(body)
        guard checksum.value == loaded.head.bodyChecksum else { throw DiskEntryFormat.Problem.checksumMismatch }
        return (loaded.head, body)
    }

    /// Indexed entries over ``verifyEveryReadMax`` among index slots `start..<start + count`,
    /// and where the next batch starts (nil after the last): the scrub's walk.
    func largeEntries(start: Int, count: Int) -> (entries: [DiskIndex.Entry], next: Int?) {
        index.withLock { $0.entries(largerThan: DiskCache.verifyEveryReadMax, start: start, count: count) }
    }

    /// The scrub's check of one entry, on its thread: returns true when it is sound (or gone),
    /// drops it (logged, counted) and returns false when it is damaged.
    func scrub(_ entry: DiskIndex.Entry) -> Bool {
        do {
            try checkBody(entry)
            return true
        } catch {
            return !discard(entry, after: error)
        }
    }

    /// Streams a large entry's body through its checksums, block by block against its block
    /// table and whole against its body checksum; throws what is wrong with it.
    func checkBody(_ entry: DiskIndex.Entry) throws {
        let loaded = try loadHead(entry)
        let head = loaded.head
        let blocked = DiskEntryFormat.isBlocked(bodyLength: head.bodyLength, version: head.version)
        if !blocked, head.bodyLength > Int64(DiskEntryFormat.blockSize) {
            throw DiskEntryFormat.Problem.unblockedLargeBody(version: head.version)
        }
        let table =
            blocked ? try FileSystem.read(loaded.file.fd, at: loaded.bodyOffset + head.bodyLength, count: Int(head.tableLength)) : []
        var checksum = BodyChecksum(entryVersion: head.version)
        for block in 0..<DiskEntryFormat.blockCount(bodyLength: head.bodyLength) {
            let range = DiskEntryFormat.blockRange(block, bodyLength: head.bodyLength)
            let chunk = try FileSystem.read(loaded.file.fd, at: loaded.bodyOffset + range.lowerBound, count: range.count)
            guard chunk.count == range.count else {
                throw DiskEntryFormat.Problem.truncated(expected: range.upperBound, actual: range.lowerBound + Int64(chunk.count))
            }
            if blocked {
                guard let expected = DiskEntryFormat.blockChecksum(inTable: table[...], at: block) else {
                    throw DiskEntryFormat.Problem.truncated(expected: head.tableLength, actual: Int64(table.count))
                }
                try DiskEntryFormat.checkBlock(chunk, block: block, expected: expected, version: head.version)
            }
            checksum.update(chunk)
        }
        guard checksum.value == head.bodyChecksum else { throw DiskEntryFormat.Problem.checksumMismatch }
    }

    /// What ``readBlock(of:block:completion:)`` found.
    public enum BlockRead: Sendable {
        /// The block's bytes, checked against its checksum: send these, never the file's.
        case checked([UInt8])
        /// The block is damaged (the entry is dropped and counted) or unreadable: end the
        /// response without completing it.
        case failed
    }

    /// Reads block `block` of a file-backed body (``Lookup/hit(_:)`` of a body over one block) on
    /// the block reader thread (`blockReader`) and checks it against its entry in the block table; `completion`
    /// (called there) receives the checked bytes. A damaged block drops the entry, counted as
    /// a corruption, so the next request fetches it again.
    public func readBlock(of stored: StoredResponse, block: Int, completion: @escaping @Sendable (BlockRead) -> Void) {
        blockReader.submit { [self] in completion(readCheckedBlock(of: stored, block: block)) }
    }

    /// ``readBlock(of:block:completion:)``'s work, on the calling thread.
    func readCheckedBlock(of stored: StoredResponse, block: Int) -> BlockRead {
        guard case .file(let file, let bodyOffset, let bodyLength, let format) = stored.body else { return .failed }
        do {
            let range = DiskEntryFormat.blockRange(block, bodyLength: bodyLength)
            let tableOffset = bodyOffset + bodyLength + Int64(block) * 8
            let entry = try FileSystem.read(file.fd, at: tableOffset, count: 8)
            guard let expected = DiskEntryFormat.blockChecksum(inTable: entry[...], at: 0) else {
                throw DiskEntryFormat.Problem.truncated(expected: tableOffset + 8, actual: tableOffset + Int64(entry.count))
            }
            let bytes = try FileSystem.read(file.fd, at: bodyOffset + range.lowerBound, count: range.count)
            guard bytes.count == range.count else {
                throw DiskEntryFormat.Problem.truncated(expected: range.upperBound, actual: range.lowerBound + Int64(bytes.count))
            }
            try DiskEntryFormat.checkBlock(bytes, block: block, expected: expected, version: format)
            return .checked(bytes)
        } catch {
            // Dropped and counted once: a promotion's read may have found the damage first.
            let name = DiskCache.entryName(key: stored.key, vary: stored.varyValues)
            if let entry = index.withLock({ $0.entry(named: name) }) { discard(entry, after: error) }
            return .failed
        }
    }

    /// Checks an entry of `key` on the reader thread; `completion` (called there) receives the
    /// outcome. A bad entry is deleted and counted. While the start-up scan runs, a name not
    /// indexed yet is looked for on disk here (``unindexedEntry(named:key:)``). `stamp`, taken
    /// before this is called, goes with a sound outcome.
    public func verify(
        _ name: EntryName, key: CacheKey, stamp: InvalidationLog.Stamp? = nil, completion: @escaping @Sendable (Verification) -> Void
    ) {
        reader.submit { [self] in
            let found: (entry: DiskIndex.Entry, loaded: LoadedHead?)
            if let entry = index.withLock({ $0.entry(named: name) }) {
                found = (entry, nil)
            } else if let unindexed = unindexedEntry(named: name, key: key) {
                found = (unindexed.entry, unindexed.loaded)
            } else {
                completion(.dropped)  // removed meanwhile, or not on disk
                return
            }
            let entry = found.entry
            do {
                let loaded = try found.loaded ?? loadHead(entry)
                // As lookup checks on the loop: a sound record of another URL is not this one's.
                guard loaded.head.key == entry.key.url else { throw DiskEntryFormat.Problem.keyMismatch }
                // Later hits on the loops read the file through this descriptor.
                if entry.segment == 0, DiskCache.readOnLoop(recordSize: entry.size) { openFiles.keep(loaded.file, named: entry.name) }
                if DiskEntryFormat.isBlocked(bodyLength: loaded.head.bodyLength, version: loaded.head.version) {
                    // Checked block by block as it is sent: served from this descriptor, not
                    // looked up again (the loop could find it closed by then, and come back).
                    completion(.sound(storedResponse(key: entry.key, loaded: loaded, serial: entry.serial), since: stamp))
                } else {
                    // As lookup: a body over a block without block checksums (an older format)
                    // is not held in memory whole to be checked; it is dropped.
                    guard loaded.head.bodyLength <= Int64(DiskEntryFormat.blockSize) else {
                        throw DiskEntryFormat.Problem.unblockedLargeBody(version: loaded.head.version)
                    }
                    let checked = try readChecked(loaded)
                    completion(
                        .sound(
                            storedResponse(key: entry.key, head: checked.head, body: .memory(checked.body), serial: entry.serial),
                            since: stamp))
                }
            } catch {
                discard(entry, after: error)
                completion(.dropped)
            }
        }
    }

    /// While the start-up scan runs, the entry of `key` without Vary that it may not have
    /// reached yet, looked for under its file name `name` (on the reader thread: a loop opens no
    /// file) and indexed when its head is this key's; nil when there is none, it is another
    /// URL's or unreadable (the scan drops a damaged one when it gets there), or a removal since
    /// the scan began forbids it (``DiskIndex/insertIfAbsent(_:)``). The caller found `name`
    /// unindexed, but the scan may have indexed it (or ended) since: then the index's entry is
    /// the one to check, with no head loaded.
    func unindexedEntry(named name: EntryName, key: CacheKey) -> (entry: DiskIndex.Entry, loaded: LoadedHead?)? {
        guard !isIndexComplete else { return index.withLock { $0.entry(named: name) }.map { ($0, nil) } }
        guard name == DiskCache.entryName(key: key, vary: [:]),
            let loaded = try? loadHead(name: name), loaded.head.key == key.url, loaded.head.vary.isEmpty
        else { return nil }
        let entry = DiskIndex.Entry(
            key: key, vary: [:], name: name, size: loaded.recordLength, responseTime: loaded.head.responseTime,
            bodyTime: loaded.head.bodyArrival)
        return index.withLock { index in
            if let indexed = index.entry(named: name) { return (indexed, nil) }
            guard index.insertIfAbsent(entry), let indexed = index.entry(named: name) else { return nil }
            return (indexed, loaded)
        }
    }

    /// A check of whether the index still holds the entry `stored` was read from
    /// (``StoredResponse/diskSerial``), for the memory tier to make under its lock as a
    /// promotion lands (the index's lock is taken inside the memory tier's, never the other
    /// way). Always true for a response not read from disk.
    public func stillHolds(_ stored: StoredResponse) -> @Sendable () -> Bool {
        let serial = stored.diskSerial
        guard serial != 0 else { return { true } }
        let name = DiskCache.entryName(key: stored.key, vary: stored.varyValues)
        return { [index] in index.withLock { $0.holds(name, serial: serial) } }
    }

    /// A check, for the memory tier to make under its lock as a refresh of `original` lands,
    /// that the index holds an entry of its variant with its body (``StoredResponse/holdsBody(of:)``).
    public func holdsBody(of original: StoredResponse) -> @Sendable () -> Bool {
        let name = DiskCache.entryName(key: original.key, vary: original.varyValues)
        let bodyTime = original.bodyTime
        return { [index] in index.withLock { $0.holdsBody(named: name, arrivedAt: bodyTime) } }
    }

    /// Reads a file-backed response's body into memory on the reader thread, checked against
    /// its checksum, as the array it was read into (the memory tier moves a body of
    /// ``MemoryFileBudget/fileSizes`` into a memory file on its first hit there): nil
    /// (and the entry dropped) if it does not match. Nothing is read, and nil returned, when
    /// `alreadyHeld` says so as the read would start (a promotion queued by another hit before
    /// this one has landed).
    public func readIntoMemory(
        _ stored: StoredResponse, unless alreadyHeld: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (StoredResponse?) -> Void
    ) {
        let name = DiskCache.entryName(key: stored.key, vary: stored.varyValues)
        reader.submit { [self] in
            // The version `stored` was read from, not one stored under its name since.
            guard case .file = stored.body, !alreadyHeld(), let entry = index.withLock({ $0.entry(named: name) }),
                stored.diskSerial == 0 || entry.serial == stored.diskSerial
            else {
                completion(nil)
                return
            }
            do {
                let checked = try readChecked(entry)
                guard checked.head.key == stored.key.url else { throw DiskEntryFormat.Problem.keyMismatch }
                completion(stored.withBody(.memory(checked.body)))
            } catch {
                discard(entry, after: error)
                completion(nil)
            }
        }
    }

    /// An indexed entry, as ``list(prefix:limit:)`` reports it.
    public struct Listing: Sendable {
        public let key: CacheKey
        /// The request header values this variant was selected by (RFC 9111 §4.1).
        public let vary: [String: String]
        /// What the entry takes on disk, head and body.
        public let bytes: Int64
        /// Lookups that found it since this process started.
        public let hits: Int
        let name: EntryName
    }

    /// Counts a lookup that found the stored variant `stored` on disk.
    public func countHit(_ stored: StoredResponse) {
        let name = DiskCache.entryName(key: stored.key, vary: stored.varyValues)
        index.withLock { $0.countHit(named: name) }
    }

    /// The stored response a listed entry holds, its head read (no body): for its age and
    /// freshness. Nil when it is gone or unreadable (the listing then leaves those out).
    public func head(of listing: Listing) -> StoredResponse? {
        guard let entry = index.withLock({ $0.entry(named: listing.name) }), let loaded = try? loadHead(entry),
            loaded.head.key == listing.key.url
        else { return nil }
        return storedResponse(key: listing.key, loaded: loaded)
    }

    /// Indexed entries whose URL starts with `prefix` (with `exactly`, is it), at most `limit`, in no particular order.
    /// The index lock is let go every ``listSpan`` slots (an entry indexed or moved meanwhile
    /// may be missed), so listing a million entries does not stall the loops.
    public func list(prefix: String, exactly: Bool = false, limit: Int) -> [Listing] {
        var found: [Listing] = []
        var start: Int? = 0
        while let from = start, found.count < limit {
            let (batch, next) = index.withLock {
                $0.entries(prefix: prefix, exactly: exactly, from: from, span: DiskCache.listSpan, limit: limit - found.count)
            }
            found += batch.map { Listing(key: $0.key, vary: $0.vary, bytes: $0.size, hits: $0.hits, name: $0.name) }
            start = next
        }
        return found
    }

    /// Index slots a listing looks at per hold of the lock.
    static let listSpan = 4096
}

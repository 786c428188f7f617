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
        /// A usable response; its body is a file range (sendfile it).
        case hit(StoredResponse)
        /// An entry whose body must be checked first, off the event loop: one over
        /// ``verifyEveryReadMax`` not checked since start-up, or a smaller one too large to check
        /// on the loop. Call ``verify(_:completion:)``.
        case unverified(EntryName)
    }

    /// Records up to this size (preamble, head and body) have their body checked on every
    /// read and are served from the very bytes checked, so damage done while the daemon runs
    /// is never served. Those bytes stay the array they were read into: copying them into a
    /// memory file to send them once would cost more than the send (the memory tier moves
    /// them into one if it keeps them and they are hit again, ``TieredCache``). Larger ones
    /// are checked on their first read after start-up and by the background scrub
    /// (`disk.scrub_rate`). 1 MiB: reading and checking one costs about as much as serving it
    /// (docs/PERFORMANCE.md, "Design choices").
    public static let verifyEveryReadMax: Int64 = 1 << 20
    /// Records up to this size are read and checked on the event loop itself (a segment
    /// record's body is at most 64 KiB); larger ones on the reader thread.
    static let verifyOnLoopMax: Int64 = 80 * 1024

    /// The outcome of ``verify(_:completion:)``.
    public enum Verification: Sendable {
        /// Sound. For a record up to ``verifyEveryReadMax``, the response with the checked body
        /// in memory, to serve as it is; for a larger one nil: it is marked checked, look up again.
        case sound(StoredResponse?)
        /// Damaged (deleted, counted) or gone: look up again.
        case dropped
    }

    /// Finds a stored response for `key` whose Vary values match `request`. Cheap: an index probe,
    /// then open and a small pread of the head (page cache). While the start-up scan has not
    /// reached an entry, it is found by its file name (entries without Vary).
    public func lookup(_ key: CacheKey, request: HTTPHeaders) -> Lookup {
        var candidates = index.withLock { $0.lookup(key) }
        if candidates.isEmpty {
            guard !isIndexComplete else { return .miss }
            let name = DiskCache.entryName(key: key, vary: [:])
            guard let loaded = try? loadHead(name: name), loaded.head.key == key.url, loaded.head.vary.isEmpty else {
                return .miss
            }
            let entry = DiskIndex.Entry(
                key: key, vary: [:], name: name, size: loaded.recordLength, verified: false)
            _ = index.withLock { $0.insertIfAbsent(entry) }
            candidates = [entry]
        }
        guard let entry = candidates.first(where: { VaryMatcher.matches(vary: $0.vary, request: request) }) else {
            return .miss
        }
        if entry.size <= DiskCache.verifyEveryReadMax {
            guard entry.size <= DiskCache.verifyOnLoopMax else { return .unverified(entry.name) }
            do {
                let checked = try readChecked(entry)
                guard checked.head.key == key.url else { throw DiskEntryFormat.Problem.keyMismatch }
                return .hit(storedResponse(key: key, head: checked.head, body: .memory(checked.body)))
            } catch {
                discard(entry, after: error)
                return .miss
            }
        }
        guard entry.verified else { return .unverified(entry.name) }
        do {
            let loaded = try loadHead(entry)
            guard loaded.head.key == key.url else { throw DiskEntryFormat.Problem.keyMismatch }
            return .hit(storedResponse(key: key, loaded: loaded))
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
    }

    /// Opens an indexed entry — its file, or its record in a segment — and parses its head.
    func loadHead(_ entry: DiskIndex.Entry) throws -> LoadedHead {
        guard entry.segment != 0 else { return try loadHead(name: entry.name) }
        guard let file = segments.file(entry.segment) else {
            throw SystemError(call: "open (segment \(entry.segment))", errno: ENOENT)
        }
        return try loadRecord(file, at: entry.offset, length: entry.size, inSegment: true)
    }

    /// Opens an entry file and parses its head; checks the file size against the recorded lengths.
    func loadHead(name: EntryName) throws -> LoadedHead {
        let file = try OpenFile.open(at: entriesDirectoryFD.load(ordering: .acquiring), relativePath(forName: name))
        let fileSize = try FileSystem.size(of: file.fd)
        return try loadRecord(file, at: 0, length: fileSize, inSegment: false)
    }

    /// Parses the record at `offset` in `file` (an entry file's only one, or one in a segment)
    /// whose length is known to be `length`: a record whose lengths say otherwise is corrupt.
    /// A record freed in its segment since it was indexed is gone (ENOENT), not corrupt.
    func loadRecord(_ file: OpenFile, at offset: Int64, length: Int64, inSegment: Bool) throws -> LoadedHead {
        var prefix = try FileSystem.read(file.fd, at: offset, count: Int(min(length, 4096)))
        let preamble = try DiskEntryFormat.decodePreamble(prefix[...], acceptingFreed: inSegment)
        if preamble.freed { throw SystemError(call: "read (record freed)", errno: ENOENT) }
        guard preamble.recordLength == length else {
            throw DiskEntryFormat.Problem.truncated(expected: preamble.recordLength, actual: length)
        }
        if inSegment {
            // A segment cut short (by hand, by a full disk, by a crash of another writer) must
            // not be served: the record has to be whole before its head goes out.
            let fileSize = try FileSystem.size(of: file.fd)
            guard fileSize >= offset + length else {
                throw DiskEntryFormat.Problem.truncated(expected: offset + length, actual: fileSize)
            }
        }
        let headEnd = DiskEntryFormat.preambleLength + preamble.headLength
        if prefix.count < headEnd {
            prefix = try FileSystem.read(file.fd, at: offset, count: headEnd)
        }
        let head = try DiskEntryFormat.decodeHead(prefix[DiskEntryFormat.preambleLength..<headEnd], preamble: preamble)
        return LoadedHead(head: head, file: file, bodyOffset: offset + Int64(headEnd), recordLength: length)
    }

    func storedResponse(key: CacheKey, loaded: LoadedHead) -> StoredResponse {
        storedResponse(key: key, head: loaded.head, body: .file(loaded.file, offset: loaded.bodyOffset, length: loaded.head.bodyLength))
    }

    func storedResponse(key: CacheKey, head: DiskEntryFormat.Head, body: StoredResponse.Body) -> StoredResponse {
        StoredResponse.make(
            key: key, status: head.status, reason: head.reason, headers: head.headers, body: body,
            requestTime: head.requestTime, responseTime: head.responseTime, varyValues: head.vary)
    }

    // MARK: Verification and promotion (reader thread)

    /// Reads a whole record (one read: callers bound its size) and checks its head and body
    /// against their checksums: what is returned is exactly what was checked.
    func readChecked(_ entry: DiskIndex.Entry) throws -> (head: DiskEntryFormat.Head, body: [UInt8]) {
        let loaded = try loadHead(entry)
        let body = try FileSystem.read(loaded.file.fd, at: loaded.bodyOffset, count: Int(loaded.head.bodyLength))
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

    /// The scrub's check of one entry, on its thread: marks it checked and returns true when it
    /// is sound (or gone), drops it (logged, counted) and returns false when it is damaged.
    func scrub(_ entry: DiskIndex.Entry) -> Bool {
        do {
            try checkBody(entry)
            index.withLock { $0.markVerified(entry.name) }
            return true
        } catch {
            return !discard(entry, after: error)
        }
    }

    /// Streams a large entry's body through its checksum; throws what is wrong with it.
    func checkBody(_ entry: DiskIndex.Entry) throws {
        let loaded = try loadHead(entry)
        var checksum = BodyChecksum(entryVersion: loaded.head.version)
        var offset = loaded.bodyOffset
        let end = loaded.bodyOffset + loaded.head.bodyLength
        while offset < end {
            let chunk = try FileSystem.read(loaded.file.fd, at: offset, count: Int(min(1 << 20, end - offset)))
            if chunk.isEmpty { throw DiskEntryFormat.Problem.truncated(expected: end, actual: offset) }
            checksum.update(chunk)
            offset += Int64(chunk.count)
        }
        guard checksum.value == loaded.head.bodyChecksum else { throw DiskEntryFormat.Problem.checksumMismatch }
    }

    /// Checks an entry on the reader thread; `completion` (called there) receives the
    /// outcome. A bad entry is deleted and counted.
    public func verify(_ name: EntryName, completion: @escaping @Sendable (Verification) -> Void) {
        reader.submit { [self] in
            guard let entry = index.withLock({ $0.entry(named: name) }) else {
                completion(.dropped)  // removed meanwhile
                return
            }
            do {
                if entry.size <= DiskCache.verifyEveryReadMax {
                    let checked = try readChecked(entry)
                    completion(.sound(storedResponse(key: entry.key, head: checked.head, body: .memory(checked.body))))
                } else {
                    try checkBody(entry)
                    index.withLock { $0.markVerified(name) }
                    completion(.sound(nil))
                }
            } catch {
                discard(entry, after: error)
                completion(.dropped)
            }
        }
    }

    /// Reads a file-backed response's body into memory on the reader thread, checked against
    /// its checksum, as the array it was read into (the memory tier moves a body of
    /// ``StoredResponse/Body/memoryFileSizes`` into a memory file on its first hit there): nil
    /// (and the entry dropped) if it does not match. Nothing is read, and nil returned, when
    /// `alreadyHeld` says so as the read would start (a promotion queued by another hit before
    /// this one has landed).
    public func readIntoMemory(
        _ stored: StoredResponse, unless alreadyHeld: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (StoredResponse?) -> Void
    ) {
        let name = DiskCache.entryName(key: stored.key, vary: stored.varyValues)
        reader.submit { [self] in
            guard case .file = stored.body, !alreadyHeld(), let entry = index.withLock({ $0.entry(named: name) }) else {
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

    /// Indexed entries whose URL starts with `prefix`, at most `limit`, in no particular order.
    /// The index lock is let go every ``listSpan`` slots (an entry indexed or moved meanwhile
    /// may be missed), so listing a million entries does not stall the loops.
    public func list(prefix: String, limit: Int) -> [Listing] {
        var found: [Listing] = []
        var start: Int? = 0
        while let from = start, found.count < limit {
            let (batch, next) = index.withLock {
                $0.entries(prefix: prefix, from: from, span: DiskCache.listSpan, limit: limit - found.count)
            }
            found += batch.map { Listing(key: $0.key, vary: $0.vary, bytes: $0.size, hits: $0.hits, name: $0.name) }
            start = next
        }
        return found
    }

    /// Index slots a listing looks at per hold of the lock.
    static let listSpan = 4096
}

import Glibc
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// The persistent tier: one file per stored response under `directory/v1/ab/cd/<hash>`,
/// written to `directory/tmp/` while the body streams and renamed into place only once it is
/// complete and its length checked (see ``DiskEntryFormat`` for the file layout).
///
/// Threads: lookups run on event loops (a mutex-guarded index probe, then open + pread of the
/// head from the page cache), and so do ``storeInline(_:head:)``'s small writes while the disk
/// is fast. Everything else that blocks — streamed writes, unlinking, evicting, verifying
/// checksums, the start-up scan — runs on ``BlockingWorker``s: `writer` (writes, renames,
/// deletions, eviction, in order), `reader` (checksum verification, reads for promotion into
/// memory) and `scanner` (the start-up scan, then it ends).
///
/// State: `index` and `limits` are guarded by their mutexes; counters are atomics.
/// Crash safety: a file in `v1/` is complete once it is indexed (renamed from `tmp/`, or written
/// in place with one `writev`; see ``writeEntry``); leftovers in `tmp/` are deleted at start-up;
/// a file cut short by a crash or damaged by power loss fails its size or checksum check and is
/// deleted instead of served.
public final class DiskCache: Sendable {
    /// The absolute cache directory.
    public let directory: String
    private let index = Mutex(DiskIndex())
    private let limits: Mutex<Limits>
    let writer = BlockingWorker(name: "larder-disk-w")
    let reader = BlockingWorker(name: "larder-disk-r")
    /// Runs the start-up scan only, so checksum checks for early hits need not wait for it.
    private let scanner = BlockingWorker(name: "larder-disk-s")
    let logger: Logger
    private let scanComplete = Atomic<Bool>(false)
    /// Monotonic time until which new writes are refused after a disk error.
    private let degradedUntil = Atomic<UInt64>(0)
    private let lastErrorLog = Atomic<UInt64>(0)
    private let trashCounter = Atomic<Int>(0)
    private let temporarySequence = Atomic<UInt64>(0)
    /// `tmp/` and `v1/`, opened once: stores and lookups name files relative to them (see
    /// ``FileSystem/openDirectory(_:)``). ``removeAll()`` swaps in a handle on the new `v1/`;
    /// the old one stays open until ``deinit`` because an event loop may be using it that very
    /// moment (one descriptor per clear).
    private let temporaryDirectoryFD: Int32
    private let entriesDirectoryFD: Atomic<Int32>
    private let retiredDirectoryFDs = Mutex<[Int32]>([])
    /// An inline store whose file calls take longer than this (10 ms) means the disk is not
    /// fast enough to write on an event loop. Well above a scheduler time slice (3-4 ms): a loop
    /// thread preempted in the middle of a write on a busy core is not a slow disk. (A variable
    /// so that tests can make every store "slow".)
    let slowInlineWrite = Atomic<UInt64>(10_000_000)
    /// Monotonic time before which ``storeInline(_:head:)`` declines (after a slow inline write).
    private let inlineAllowedAfter = Atomic<UInt64>(0)
    /// Writer jobs queued or running that delete or replace files (`submitDeletion`): while
    /// there are any, stores go to the writer behind them instead of overtaking them inline.
    private let deletionsPending = Atomic<Int>(0)

    public let evictions = AtomicCounter()
    public let corruptions = AtomicCounter()
    public let writeErrors = AtomicCounter()
    public let writesCompleted = AtomicCounter()

    /// Size limits (a smaller `maxBytes` applied with ``setLimits(_:)`` evicts down to it).
    public struct Limits: Sendable, Equatable {
        public var maxBytes: Int64
        public var maxObjectBytes: Int64
        public init(maxBytes: Int64, maxObjectBytes: Int64) {
            self.maxBytes = maxBytes
            self.maxObjectBytes = maxObjectBytes
        }
    }

    /// Counters and sizes for metrics.
    public struct Statistics: Sendable {
        public var entries: Int
        public var bytes: Int64
        public var evictions: Int
        public var corruptions: Int
        public var writeErrors: Int
        public var degraded: Bool
        public var indexComplete: Bool
    }

    /// Creates the directory layout (`v1/`, `tmp/`) if needed. Nothing is read yet: call
    /// ``start()``.
    public init(directory: String, limits: Limits, logger: Logger) throws(SystemError) {
        var absolute = directory
        if !absolute.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let cwd = getcwd(&buffer, buffer.count).map { _ in String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) } ?? "."
            absolute = cwd + "/" + directory
        }
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        self.directory = absolute
        self.limits = Mutex(limits)
        self.logger = logger
        try FileSystem.makeDirectories(absolute + "/v1")
        try FileSystem.makeDirectories(absolute + "/tmp")
        temporaryDirectoryFD = try FileSystem.openDirectory(absolute + "/tmp")
        do {
            entriesDirectoryFD = Atomic(try FileSystem.openDirectory(absolute + "/v1"))
        } catch {
            Syscall.close(temporaryDirectoryFD)
            throw error
        }
    }

    deinit {
        Syscall.close(temporaryDirectoryFD)
        Syscall.close(entriesDirectoryFD.load(ordering: .acquiring))
        for fd in retiredDirectoryFDs.withLock({ $0 }) { Syscall.close(fd) }
    }

    /// Removes leftover temporary files and starts rebuilding the index from the entry files in
    /// the background. Lookups work meanwhile (see ``lookup(_:request:)``).
    public func start() {
        submitDeletion { [self] in
            for name in (try? FileSystem.list(directory + "/tmp")) ?? [] {
                try? FileSystem.remove(directory + "/tmp/" + name)
            }
            for name in (try? FileSystem.list(directory)) ?? [] where name.hasPrefix("trash-") {
                FileSystem.removeTree(directory + "/" + name)
            }
        }
        index.withLock { $0.beginScan() }
        scanner.submit { [self] in
            scan()
            scanner.stop()
        }
    }

    /// Waits for queued writes and deletions (tests and shutdown).
    public func drain() {
        writer.drain()
    }

    public func stop() {
        writer.drain()
        writer.stop()
        reader.stop()
        scanner.stop()
    }

    public var isIndexComplete: Bool { scanComplete.load(ordering: .acquiring) }

    public var statistics: Statistics {
        let (entries, bytes) = index.withLock { ($0.count, $0.totalBytes) }
        return Statistics(
            entries: entries, bytes: bytes, evictions: evictions.load(), corruptions: corruptions.load(),
            writeErrors: writeErrors.load(), degraded: isDegraded, indexComplete: isIndexComplete)
    }

    public var currentLimits: Limits { limits.withLock { $0 } }

    /// Applies new limits, evicting down to a smaller size in the background.
    public func setLimits(_ newLimits: Limits) {
        limits.withLock { $0 = newLimits }
        submitDeletion { [self] in evictIfNeeded() }
    }

    // MARK: Names

    /// The file name for a key and its Vary values.
    static func fileName(key: CacheKey, vary: [String: String]) -> String {
        if vary.isEmpty { return StableHash.hex(key.url) }
        let secondary = vary.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        return StableHash.hex(key.url + "\n" + secondary)
    }

    /// `directory/v1/ab/cd/name` for a name `abcd…`.
    func path(forName name: String) -> String {
        directory + "/v1/" + relativePath(forName: name)
    }

    /// `ab/cd/name` (inside `v1/`) for a name `abcd…`, built in one allocation: every disk lookup
    /// and store needs one.
    func relativePath(forName name: String) -> String {
        let count = name.utf8.count
        // Entry names are 32 hex digits; a shorter name (none is made) keeps the plain spelling.
        guard count >= 4 else {
            return String(name.prefix(2)) + "/" + String(name.dropFirst(2).prefix(2)) + "/" + name
        }
        return String(unsafeUninitializedCapacity: count + 6) { path in
            // The name goes in after the six bytes of `ab/cd/`, which are then copied from it.
            var end = 6
            for byte in name.utf8 {
                path[end] = byte
                end += 1
            }
            path[0] = path[6]
            path[1] = path[7]
            path[2] = UInt8(ascii: "/")
            path[3] = path[8]
            path[4] = path[9]
            path[5] = UInt8(ascii: "/")
            return end
        }
    }

    // MARK: Lookup (event loop)

    /// What a lookup found.
    public enum Lookup: Sendable {
        case miss
        /// A usable response; its body is a file range (sendfile it).
        case hit(StoredResponse)
        /// An entry whose body checksum has not been checked since start-up: call
        /// ``verify(_:completion:)`` and look up again.
        case unverified(String)
    }

    /// Finds a stored response for `key` whose Vary values match `request`. Cheap: an index probe,
    /// then open and a small pread of the head (page cache). While the start-up scan has not
    /// reached an entry, it is found by its file name (entries without Vary).
    public func lookup(_ key: CacheKey, request: HTTPHeaders) -> Lookup {
        var candidates = index.withLock { $0.lookup(key) }
        if candidates.isEmpty {
            guard !isIndexComplete else { return .miss }
            let name = DiskCache.fileName(key: key, vary: [:])
            guard let loaded = try? loadHead(name: name), loaded.head.key == key.url, loaded.head.vary.isEmpty else {
                return .miss
            }
            let entry = DiskIndex.Entry(
                key: key, vary: [:], name: name, size: loaded.fileSize, verified: false)
            index.withLock { $0.insertIfAbsent(entry) }
            candidates = [entry]
        }
        guard let entry = candidates.first(where: { VaryMatcher.matches(vary: $0.vary, request: request) }) else {
            return .miss
        }
        guard entry.verified else { return .unverified(entry.name) }
        do {
            let loaded = try loadHead(name: entry.name)
            guard loaded.head.key == key.url else { throw DiskEntryFormat.Problem.keyMismatch }
            return .hit(storedResponse(key: key, loaded: loaded))
        } catch {
            discard(entry.name, after: error)
            return .miss
        }
    }

    struct LoadedHead {
        let head: DiskEntryFormat.Head
        let file: OpenFile
        let bodyOffset: Int64
        let fileSize: Int64
    }

    /// Opens an entry and parses its head; checks the file size against the recorded lengths.
    func loadHead(name: String) throws -> LoadedHead {
        let file = try OpenFile.open(at: entriesDirectoryFD.load(ordering: .acquiring), relativePath(forName: name))
        let fileSize = try FileSystem.size(of: file.fd)
        var prefix = try FileSystem.read(file.fd, at: 0, count: 4096)
        let (bodyLength, checksum, headLength) = try DiskEntryFormat.decodePreamble(prefix)
        let bodyOffset = Int64(DiskEntryFormat.preambleLength + headLength)
        let expected = bodyOffset + bodyLength
        guard fileSize == expected else { throw DiskEntryFormat.Problem.truncated(expected: expected, actual: fileSize) }
        if prefix.count < Int(bodyOffset) {
            prefix = try FileSystem.read(file.fd, at: 0, count: Int(bodyOffset))
        }
        let head = try DiskEntryFormat.decodeHead(
            prefix[DiskEntryFormat.preambleLength..<Int(bodyOffset)], bodyLength: bodyLength, bodyChecksum: checksum)
        return LoadedHead(head: head, file: file, bodyOffset: bodyOffset, fileSize: fileSize)
    }

    private func storedResponse(key: CacheKey, loaded: LoadedHead) -> StoredResponse {
        let head = loaded.head
        return StoredResponse(
            key: key, status: head.status, reason: head.reason, headers: head.headers,
            body: .file(loaded.file, offset: loaded.bodyOffset, length: head.bodyLength),
            requestTime: head.requestTime, responseTime: head.responseTime, varyValues: head.vary,
            freshnessLifetime: Freshness.lifetime(
                status: head.status, headers: head.headers, cacheControl: CacheControl(head.headers),
                responseTime: head.responseTime),
            correctedInitialAge: Freshness.correctedInitialAge(
                headers: head.headers, requestTime: head.requestTime, responseTime: head.responseTime))
    }

    // MARK: Verification and promotion (reader thread)

    /// Checks an entry's body against its checksum on the reader thread; `completion` (called
    /// there) receives whether it is sound. A bad entry is deleted.
    public func verify(_ name: String, completion: @escaping @Sendable (Bool) -> Void) {
        reader.submit { [self] in
            let sound: Bool
            do {
                let loaded = try loadHead(name: name)
                var checksum = BodyChecksum()
                var offset = loaded.bodyOffset
                let end = loaded.bodyOffset + loaded.head.bodyLength
                while offset < end {
                    let chunk = try FileSystem.read(loaded.file.fd, at: offset, count: Int(min(1 << 20, end - offset)))
                    if chunk.isEmpty { throw DiskEntryFormat.Problem.truncated(expected: end, actual: offset) }
                    checksum.update(chunk)
                    offset += Int64(chunk.count)
                }
                guard checksum.value == loaded.head.bodyChecksum else { throw DiskEntryFormat.Problem.checksumMismatch }
                index.withLock { $0.markVerified(name) }
                sound = true
            } catch {
                discard(name, after: error)
                sound = false
            }
            completion(sound)
        }
    }

    /// Reads a file-backed response's body into memory on the reader thread, in the memory
    /// tier's form (``StoredResponse/Body/inMemory(_:budget:)``).
    public func readIntoMemory(_ stored: StoredResponse, completion: @escaping @Sendable (StoredResponse?) -> Void) {
        reader.submit {
            guard case .file(let file, let offset, let length) = stored.body,
                let bytes = try? FileSystem.read(file.fd, at: offset, count: Int(length)), bytes.count == Int(length)
            else {
                completion(nil)
                return
            }
            completion(stored.withBody(.inMemory(bytes)))
        }
    }

    // MARK: Writing

    /// Starts storing a response whose head is known; nil when the disk tier is refusing
    /// writes after an error, or the announced length is over `max_object_bytes`.
    public func beginWrite(key: CacheKey, head: DiskEntryFormat.Head, expectedLength: Int?) -> DiskWrite? {
        guard !isDegraded else { return nil }
        let maxObject = limits.withLock { $0.maxObjectBytes }
        if let expectedLength, Int64(expectedLength) > maxObject { return nil }
        let name = DiskCache.fileName(key: key, vary: head.vary)
        return DiskWrite(cache: self, key: key, name: name, head: head, maxBytes: maxObject)
    }

    /// Stores a complete response whose body is in memory, in one writer job (temporary file,
    /// then rename), for bodies small enough to have been kept whole. With `wakeWriter` false
    /// the job waits for the next ``wakeWriter()``: an event loop stores every miss of one
    /// epoll batch and wakes the writer once (on one core each wake-up is a context switch).
    /// `body` is the body's bytes when the caller has them at hand (the stored response may keep
    /// them in an anonymous memory file); by default they are taken from `stored`. `head`
    /// describes `stored`: the entry's header fields are `stored`'s, copied in wire form.
    public func store(_ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head, wakeWriter: Bool = true) {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard let body = body ?? stored.memoryBody, !isDegraded,
            Int64(body.count) <= limits.withLock({ $0.maxObjectBytes })
        else { return }
        let name = DiskCache.fileName(key: stored.key, vary: head.vary)
        let key = stored.key
        let wireFields = stored.wireFields
        writer.submit(wake: wakeWriter) { [self] in
            writeEntry(key: key, name: name, head: head, wireFields: wireFields, body: body, onWriter: true)
        }
    }

    /// Stores a small complete response on the calling thread (an event loop, after its batch
    /// of responses went out), as nginx does: on one core, handing a 1 KiB entry to the writer
    /// thread costs more in wake-ups and context switches than the four file calls themselves.
    /// Returns false, doing nothing, when the entry must go to ``store(_:head:wakeWriter:)``
    /// instead: the body is over ``inlineLimit``, a deletion is queued or running on the writer
    /// (an earlier deletion of the same name must not be overtaken), or an inline write was
    /// slow recently — one write over ``slowInlineWrite`` sends every write to the writer for
    /// ``inlineBackoff``, so a slow or stalled disk costs the loop one stall, not one per miss.
    /// `body` and `head` as for ``store(_:body:head:wakeWriter:)``.
    public func storeInline(_ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head) -> Bool {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard stored.bodyLength <= DiskCache.inlineLimit, let body = body ?? stored.memoryBody else { return false }
        guard Clocks.monotonicNanos() >= inlineAllowedAfter.load(ordering: .relaxed),
            deletionsPending.load(ordering: .acquiring) == 0, !isDegraded,
            Int64(body.count) <= limits.withLock({ $0.maxObjectBytes })
        else { return false }
        let name = DiskCache.fileName(key: stored.key, vary: head.vary)
        let fileNanos = writeEntry(
            key: stored.key, name: name, head: head, wireFields: stored.wireFields, body: body, onWriter: false)
        // Only the file calls count: indexing is CPU work, and a slow disk is what must not
        // stall a loop.
        if let fileNanos, fileNanos > slowInlineWrite.load(ordering: .relaxed) {
            inlineAllowedAfter.store(Clocks.monotonicNanos() + DiskCache.inlineBackoff, ordering: .relaxed)
            logger.notice(
                "slow disk cache write; writing on the disk thread for 30s",
                metadata: ["milliseconds": "\(fileNanos / 1_000_000)", "directory": "\(directory)"])
        }
        if fileNanos != nil && index.withLock({ $0.totalBytes }) > limits.withLock({ $0.maxBytes }) {
            submitDeletion { [self] in evictIfNeeded() }
        }
        return true
    }

    /// Queues a writer job that deletes, replaces or evicts files; inline stores wait for it.
    /// (After ``stop()`` the job is dropped and the count stays up: nothing is stored inline
    /// while shutting down.)
    private func submitDeletion(_ job: @escaping @Sendable () -> Void) {
        deletionsPending.add(1, ordering: .releasing)
        writer.submit { [self] in
            job()
            deletionsPending.subtract(1, ordering: .releasing)
        }
    }

    /// Bodies up to this size may be written by ``storeInline(_:head:)``.
    public static let inlineLimit = 64 << 10
    /// How long writes stay on the writer thread after a slow inline write.
    static let inlineBackoff: UInt64 = 30_000_000_000

    /// Writes an entry and indexes it. Eviction runs here when `onWriter`; an event loop asks
    /// the writer for it instead. Returns the time the file calls took, or nil when the entry
    /// could not be stored.
    ///
    /// A new name is written in place, with one `writev`: create, write, close. A crash in
    /// between leaves a file whose size does not match its preamble, which the start-up scan
    /// deletes (DISK-FORMAT.md), and no lookup reads it meanwhile because the index learns of
    /// it only once it is complete (while the start-up scan runs, lookups also find entries
    /// by file name, so until then every entry goes through `tmp/`). That saves the rename,
    /// the most expensive of the file calls on tmpfs. A name that exists (a replaced response)
    /// is written to `tmp/` and renamed over it, so that clients still sending the old file
    /// keep their bytes.
    @discardableResult
    private func writeEntry(
        key: CacheKey, name: String, head: DiskEntryFormat.Head, wireFields: ArraySlice<UInt8>?, body: [UInt8],
        onWriter: Bool
    ) -> UInt64? {
        var checksum = BodyChecksum()
        checksum.update(body)
        let entryHead = DiskEntryFormat.entryHead(
            head, wireFields: wireFields, bodyLength: Int64(body.count), bodyChecksum: checksum.value)
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        let relative = relativePath(forName: name)
        let start = Clocks.monotonicNanos()
        do throws(SystemError) {
            if isIndexComplete, let fd = try DiskCache.createNew(at: entries, relative) {
                defer { Syscall.close(fd) }
                do {
                    try FileSystem.writeAll(fd, entryHead, body)
                } catch {
                    try? FileSystem.remove(at: entries, relative)
                    throw error
                }
            } else {
                let temporary = temporaryName(name, suffix: "tmp")
                do {
                    let fd = try FileSystem.createExclusive(at: temporaryDirectoryFD, temporary)
                    defer { Syscall.close(fd) }
                    try FileSystem.writeAll(fd, entryHead, body)
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
        didStore(key: key, name: name, vary: head.vary, size: Int64(entryHead.count + body.count), evict: onWriter)
        return elapsed
    }

    /// Creates `relative` (and its directories) for writing; nil when it exists already.
    private static func createNew(at entries: Int32, _ relative: String) throws(SystemError) -> Int32? {
        do {
            return try FileSystem.createExclusiveCreatingDirectory(at: entries, relative)
        } catch where error.errno == EEXIST {
            return nil
        }
    }

    /// Wakes the writer for jobs queued with `wakeWriter: false`.
    public func wakeWriter() { writer.wake() }

    /// A name in `tmp/` that no other write uses: the entry's name, this process and a counter
    /// (start-up empties `tmp/`, so names from a crashed run are gone).
    func temporaryName(_ name: String, suffix: String) -> String {
        let sequence = temporarySequence.add(1, ordering: .relaxed).newValue
        var temporary = ""
        temporary.reserveCapacity(name.utf8.count + suffix.utf8.count + 32)
        temporary += name
        temporary += "."
        temporary += String(DiskCache.processID)
        temporary += "."
        temporary += String(sequence)
        temporary += "."
        temporary += suffix
        return temporary
    }

    /// ``temporaryName(_:suffix:)`` as an absolute path.
    func temporaryPath(_ name: String, suffix: String) -> String {
        directory + "/tmp/" + temporaryName(name, suffix: suffix)
    }

    private static let processID = getpid()

    /// Called by a finished ``DiskWrite`` on the writer thread once its file is in place.
    func didStore(key: CacheKey, name: String, vary: [String: String], size: Int64, evict: Bool = true) {
        index.withLock { index in
            _ = index.insert(DiskIndex.Entry(key: key, vary: vary, name: name, size: size, verified: true))
        }
        writesCompleted.add(1)
        if evict { evictIfNeeded() }
    }

    /// Records a failed write: the tier stops taking writes for a while and says so once.
    func writeFailed(_ error: SystemError) {
        writeErrors.add(1)
        let now = Clocks.monotonicNanos()
        degradedUntil.store(now + 30_000_000_000, ordering: .releasing)
        let last = lastErrorLog.load(ordering: .relaxed)
        if last == 0 || now - last > 10_000_000_000 {
            lastErrorLog.store(now, ordering: .relaxed)
            logger.error(
                "disk cache write failed; storing in memory only for 30s",
                metadata: ["error": "\(error)", "directory": "\(directory)"])
        }
    }

    public var isDegraded: Bool {
        Clocks.monotonicNanos() < degradedUntil.load(ordering: .acquiring)
    }

    /// Evicts least recently used entries, with hysteresis: past the limit, down to 90% of it.
    private func evictIfNeeded() {
        let maxBytes = limits.withLock { $0.maxBytes }
        let evicted = index.withLock { index -> [DiskIndex.Entry] in
            guard index.totalBytes > maxBytes else { return [] }
            return index.evict(downTo: maxBytes - maxBytes / 10)
        }
        for entry in evicted {
            // Unlinking keeps the file readable for clients that have it open.
            try? FileSystem.remove(path(forName: entry.name))
        }
        if !evicted.isEmpty { evictions.add(evicted.count) }
    }

    // MARK: Removal

    /// Drops the entry `name` after reading it failed with `error`. A file that is simply gone
    /// (deleted by hand, purged or evicted since it was listed or indexed) only leaves the
    /// index; anything else is corruption: counted, logged and deleted. Returns whether it was.
    @discardableResult
    func discard(_ name: String, after error: any Error) -> Bool {
        if let error = error as? SystemError, error.errno == ENOENT {
            index.withLock { _ = $0.remove(named: name) }
            return false
        }
        index.withLock { _ = $0.remove(named: name) }
        corruptions.add(1)
        let path = path(forName: name)
        logger.warning("dropping corrupt disk cache entry", metadata: ["file": "\(path)", "reason": "\(error)"])
        submitDeletion { try? FileSystem.remove(path) }
        return true
    }

    /// Rewrites the head of the entry `refreshed` replaces (same key and variant) after a
    /// revalidation (RFC 9111 §4.3.4), copying the body into a new file that is renamed over the
    /// old one, on the writer thread. Nothing happens if the entry is gone.
    public func refresh(_ refreshed: StoredResponse) {
        let name = DiskCache.fileName(key: refreshed.key, vary: refreshed.varyValues)
        let path = path(forName: name)
        var headers = refreshed.headers
        headers.remove("Age")
        let head = DiskEntryFormat.Head(
            key: refreshed.key.url, status: refreshed.status, reason: refreshed.reason,
            requestTime: refreshed.requestTime, responseTime: refreshed.responseTime, vary: refreshed.varyValues,
            headers: headers)
        let temporary = temporaryPath(name, suffix: "refresh")
        submitDeletion { [self] in
            do {
                let old = try loadHead(name: name)
                guard old.head.key == refreshed.key.url else { return }
                let entryHead = DiskEntryFormat.entryHead(
                    head, bodyLength: old.head.bodyLength, bodyChecksum: old.head.bodyChecksum)
                let fd = try FileSystem.createExclusive(temporary)
                defer { Syscall.close(fd) }
                try FileSystem.writeAll(fd, entryHead)
                var offset = old.bodyOffset
                let end = old.bodyOffset + old.head.bodyLength
                while offset < end {
                    let chunk = try FileSystem.read(old.file.fd, at: offset, count: Int(min(1 << 20, end - offset)))
                    if chunk.isEmpty { throw DiskEntryFormat.Problem.truncated(expected: end, actual: offset) }
                    try FileSystem.writeAll(fd, chunk)
                    offset += Int64(chunk.count)
                }
                try FileSystem.rename(temporary, path)
                let size = Int64(entryHead.count) + old.head.bodyLength
                let verified = index.withLock { $0.entry(named: name)?.verified ?? false }
                index.withLock { index in
                    _ = index.insert(DiskIndex.Entry(key: refreshed.key, vary: refreshed.varyValues, name: name, size: size, verified: verified))
                }
            } catch {
                try? FileSystem.remove(temporary)
            }
        }
    }

    /// Removes one stored variant.
    public func remove(_ stored: StoredResponse) {
        let name = DiskCache.fileName(key: stored.key, vary: stored.varyValues)
        index.withLock { _ = $0.remove(named: name) }
        let path = path(forName: name)
        submitDeletion { try? FileSystem.remove(path) }
    }

    /// Removes every stored variant of `key`. Returns whether anything was stored.
    @discardableResult
    public func purge(_ key: CacheKey) -> Bool {
        var names = index.withLock { $0.remove(key: key) }
        let direct = DiskCache.fileName(key: key, vary: [:])
        if !isIndexComplete && !names.contains(direct) && access(path(forName: direct), F_OK) == 0 { names.append(direct) }
        let paths = names.map(path(forName:))
        submitDeletion { for path in paths { try? FileSystem.remove(path) } }
        return !names.isEmpty
    }

    /// Removes everything: the entry tree is renamed away at once and deleted in the background.
    public func removeAll() {
        _ = index.withLock { $0.removeAll() }
        let trash = "\(directory)/trash-\(getpid())-\(trashCounter.add(1, ordering: .relaxed).newValue)"
        submitDeletion { [self] in
            do {
                try FileSystem.rename(directory + "/v1", trash)
                try FileSystem.makeDirectories(directory + "/v1")
                let fresh = try FileSystem.openDirectory(directory + "/v1")
                let old = entriesDirectoryFD.exchange(fresh, ordering: .acquiringAndReleasing)
                retiredDirectoryFDs.withLock { $0.append(old) }
            } catch {
                logger.error("cannot clear the disk cache", metadata: ["error": "\(error)"])
                return
            }
            FileSystem.removeTree(trash)
        }
    }

    // MARK: Start-up scan (reader thread)

    /// Walks `v1/` and indexes every entry by its head; deletes the ones that fail the size check.
    private func scan() {
        let start = Clocks.monotonicNanos()
        var batch: [DiskIndex.Entry] = []
        var found = 0
        var dropped = 0
        let root = directory + "/v1"
        for first in (try? FileSystem.list(root)) ?? [] {
            for second in (try? FileSystem.list(root + "/" + first)) ?? [] {
                for name in (try? FileSystem.list(root + "/" + first + "/" + second)) ?? [] {
                    do {
                        let loaded = try loadHead(name: name)
                        batch.append(
                            DiskIndex.Entry(
                                key: CacheKey(normalized: loaded.head.key), vary: loaded.head.vary, name: name,
                                size: loaded.fileSize, verified: false))
                        found += 1
                    } catch {
                        if discard(name, after: error) { dropped += 1 }
                    }
                    if batch.count >= 512 {
                        let entries = batch
                        index.withLock { index in for entry in entries { index.insertIfAbsent(entry) } }
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
        }
        let entries = batch
        index.withLock { index in
            for entry in entries { index.insertIfAbsent(entry) }
            index.endScan()
        }
        // Queued before the scan is declared complete, so that waiting for completion and then
        // draining the writer (tests, `drain()`) sees the eviction done.
        submitDeletion { [self] in evictIfNeeded() }
        scanComplete.store(true, ordering: .releasing)
        let millis = (Clocks.monotonicNanos() - start) / 1_000_000
        logger.info(
            "disk cache index rebuilt",
            metadata: ["entries": "\(found)", "dropped": "\(dropped)", "ms": "\(millis)", "directory": "\(directory)"])
    }
}

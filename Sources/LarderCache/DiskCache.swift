import Glibc
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// The persistent tier. Small responses (bodies up to ``inlineLimit``) are records appended
/// to segment files, `directory/v1/seg/<id>` (``DiskSegments``); larger ones have a file each,
/// `directory/v1/ab/cd/<hash>`, written to `directory/tmp/` while the body streams and renamed
/// into place only once it is complete and its length checked (see ``DiskEntryFormat`` for
/// the entry layout and DISK-FORMAT.md for both).
///
/// Threads: lookups run on event loops (a mutex-guarded index probe, then open + pread of the
/// head from the page cache), and so do ``storeInline(_:budgetNanos:)``'s small writes while the disk
/// is fast. Everything else that blocks — streamed writes, unlinking, evicting, verifying
/// checksums, the start-up scan — runs on ``BlockingWorker``s: `writer` (writes, renames,
/// deletions, eviction, in order), `reader` (checksum verification, reads for promotion into
/// memory), `blockReader` (the blocks of bodies over 1 MiB, checked as they are sent) and
/// `scanner` (the start-up scan, then it ends).
///
/// State: `index` and `limits` are guarded by their mutexes; counters are atomics; `segments`
/// guards its own state (an appender belongs to one thread at a time).
/// Crash safety: an entry is complete once it is indexed (a file renamed from `tmp/`, a record
/// appended with one `pwritev`); leftovers in `tmp/` are deleted at start-up; a record cut
/// short by a crash ends its segment and is cut off by the start-up scan; anything damaged by
/// power loss fails its size or checksum check and is dropped instead of served.
///
/// Files by job, all over this type's state (the ``DiskIndex`` under `index`): +Lookup
/// (finding and checking entries, listing), +Store (writing), +Removal (dropping, purging,
/// rewriting heads), +Eviction (room and compaction), +Scan (the start-up scan).
public final class DiskCache: Sendable {
    /// The absolute cache directory.
    public let directory: String
    let index: Locked<DiskIndex>
    /// Slice entries ever indexed (``DiskIndex/slicesInserted``).
    let slicesInserted = AtomicCounter()
    /// The operator's purges and bans, for stores that began before them (``TieredCache``
    /// records into it; its memory tier asks it too).
    let invalidations = InvalidationLog()
    let segments: DiskSegments
    /// Segments that existed at start: the start-up scan reads them (later ones are indexed as
    /// they are written).
    let startSegments: [UInt32]
    let limits: Locked<Limits>
    /// Told of each store the index refused because its name holds a response that arrived
    /// later (``DiskIndex/insert(_:capped:)``): ``TieredCache`` drops the memory tier's copy of
    /// that older response, which went in before the disk store was tried. Set once, at start.
    let whenSuperseded = Locked<(@Sendable (DiskIndex.Entry) -> Void)?>(nil)
    /// Called on the writer thread as a refresh, its new record or file written, is about to
    /// be indexed: tests store another fill at that moment (nil otherwise).
    let refreshWillLand = Locked<(@Sendable () -> Void)?>(nil)
    /// Entry files kept open for lookups on the event loops, which never open one themselves.
    let openFiles = OpenEntryFiles(capacity: DiskCache.defaultOpenFiles)
    /// Entry files kept open unless ``openFileLimit`` says otherwise.
    public static let defaultOpenFiles = 256
    let writer = BlockingWorker(name: "larder-disk-w")
    let reader = BlockingWorker(name: "larder-disk-r")
    /// Reads and checks the blocks of bodies over 1 MiB as they are sent (disk hits, and
    /// clients that fell behind a fill). A thread of its own: a large transfer is a stream of
    /// 1 MiB jobs, one queued per connection, and on `reader` every smaller disk hit (one job,
    /// its whole body) waited behind all of them — 200 KB hits went from 1.8 to 30 ms with 16
    /// clients reading a 20 MB entry. Large transfers still take turns among themselves.
    let blockReader = BlockingWorker(name: "larder-disk-b")
    /// Runs the start-up scan only, so checksum checks for early hits need not wait for it.
    let scanner = BlockingWorker(name: "larder-disk-s")
    /// Checks large entries in the background (`disk.scrub_rate`).
    public let scrubber = DiskScrubber()
    let logger: Logger
    let scanComplete = Atomic<Bool>(false)
    /// Monotonic time until which new writes are refused after a disk error.
    let degradedUntil = Atomic<UInt64>(0)
    let lastErrorLog = Atomic<UInt64>(0)
    /// When a read last failed for want of descriptors or memory was logged (every 10 s at most).
    let lastExhaustionLog = Atomic<UInt64>(0)
    let trashCounter = Atomic<Int>(0)
    let temporarySequence = Atomic<UInt64>(0)
    /// `tmp/` and `v1/`, opened once: stores and lookups name files relative to them (see
    /// ``FileSystem/openDirectory(_:)``). ``removeAll()`` points the same descriptor number at
    /// the new `v1/` (dup3 replaces it atomically), so a loop using it that very moment sees
    /// the old directory or the new one, never a closed or reused number, and no descriptor
    /// outlives a clear.
    let temporaryDirectoryFD: Int32
    let entriesDirectoryFD: Atomic<Int32>
    /// An inline store whose file calls take longer than this (10 ms) means the disk is not
    /// fast enough to write on an event loop. Well above a scheduler time slice (3-4 ms): a loop
    /// thread preempted in the middle of a write on a busy core is not a slow disk. (A variable
    /// so that tests can make every store "slow".)
    let slowInlineWrite = Atomic<UInt64>(10_000_000)
    /// Monotonic time before which ``storeInline(_:budgetNanos:)`` declines (after a slow inline write).
    let inlineAllowedAfter = Atomic<UInt64>(0)
    /// Segments whose compaction failed (writer thread): not tried again.
    let uncompactable = Locked<Set<UInt32>>([])
    /// The entries live on a memory-backed file system (tmpfs): their pages are memory, so a
    /// lookup reads them without asking the page cache first (``lookup(_:request:)``).
    let memoryBacked: Bool

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
            let cwd =
                getcwd(&buffer, buffer.count).map { _ in
                    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                } ?? "."
            absolute = cwd + "/" + directory
        }
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        self.directory = absolute
        index = Locked(DiskIndex(slicesInserted: slicesInserted))
        self.limits = Locked(limits)
        self.logger = logger
        try FileSystem.makeDirectories(absolute + "/v1")
        try FileSystem.makeDirectories(absolute + "/tmp")
        temporaryDirectoryFD = try Self.openOwnDirectory(absolute + "/tmp")
        let entries: Int32
        do {
            entries = try Self.openOwnDirectory(absolute + "/v1")
        } catch {
            Syscall.close(temporaryDirectoryFD)
            throw error
        }
        // Segments are written in place: a link in `seg`'s place is not the cache's own, and new
        // segments made through it would collide with the files of the directory it names.
        // Through `v1/`'s handle, once it is known to be the cache's own (review 81 N4).
        if FileSystem.removeIfLink(at: entries, DiskSegments.directoryName) {
            logger.warning("removed a symbolic link in place of the disk cache's segment directory", metadata: ["directory": "\(absolute)"])
        }
        startSegments = DiskSegments.list(entriesPath: absolute + "/v1")
        segments = DiskSegments(lastID: startSegments.last ?? 0)
        entriesDirectoryFD = Atomic(entries)
        memoryBacked = FileSystem.isMemoryBacked(entries)
    }

    /// `tmp/` or `v1/`: Larder removes what it finds there, so never through a symbolic link
    /// (one to a shared directory would have it emptied).
    private static func openOwnDirectory(_ path: String) throws(SystemError) -> Int32 {
        do {
            return try FileSystem.openDirectory(path, refusingLink: true)
        } catch  where error.errno == ENOTDIR {
            throw SystemError(
                call: "open \(path) (a symbolic link or not a directory: Larder empties it, so it must be a directory of the cache's own)",
                errno: ENOTDIR)
        }
    }

    deinit {
        scrubber.requestStop()
        Syscall.close(temporaryDirectoryFD)
        Syscall.close(entriesDirectoryFD.load(ordering: .acquiring))
    }

    /// How many entry files stay open for hits on the event loops (``OpenEntryFiles``): the
    /// server sets it from the open-file limit at start.
    public var openFileLimit: Int {
        get { openFiles.capacity }
        set { openFiles.capacity = newValue }
    }

    /// Removes leftover temporary files and starts rebuilding the index from the entry files in
    /// the background. Lookups work meanwhile (see ``lookup(_:request:)``).
    public func start() {
        writer.submit { [self] in
            // Through the handle opened at start: never through a link put in `tmp`'s place.
            for name in (try? FileSystem.list(at: temporaryDirectoryFD)) ?? [] {
                try? FileSystem.remove(at: temporaryDirectoryFD, name)
            }
            // removeTree removes a link, never what it names.
            for name in (try? FileSystem.list(directory)) ?? [] where name.hasPrefix("trash-") {
                FileSystem.removeTree(directory + "/" + name)
            }
        }
        index.withLock { $0.beginScan() }
        scanner.submit { [self] in
            scan()
            scanner.stop()
        }
        scrubber.start(self)
    }

    /// Waits for queued writes and deletions (tests and shutdown).
    public func drain() {
        writer.drain()
    }

    public func stop() {
        scrubber.stop()
        writer.drain()
        writer.stop()
        reader.stop()
        blockReader.stop()
        scanner.stop()
    }

    public var isIndexComplete: Bool { scanComplete.load(ordering: .acquiring) }

    public var statistics: Statistics {
        let (entries, bytes) = index.withLock { ($0.count, $0.physicalBytes) }
        return Statistics(
            entries: entries, bytes: bytes, evictions: evictions.load(), corruptions: corruptions.load(),
            writeErrors: writeErrors.load(), degraded: isDegraded, indexComplete: isIndexComplete)
    }

    public var currentLimits: Limits { limits.withLock { $0 } }

    /// Whether the tier is full: it holds at least what eviction brings it back to
    /// (``evictionTarget(_:)``), so a full tier stays between that and `maxBytes` and storing
    /// more means evicting. Read from what it holds now: a restart or a purge is seen at once.
    public var isFull: Bool {
        let maxBytes = limits.withLock { $0.maxBytes }
        return index.withLock { $0.physicalBytes } >= DiskCache.evictionTarget(maxBytes)
    }

    /// Applies new limits, evicting down to a smaller size in the background.
    public func setLimits(_ newLimits: Limits) {
        limits.withLock { $0 = newLimits }
        writer.submit { [self] in evictIfNeeded() }
    }

    // MARK: Names

    /// The name of the entry for a key and its Vary values.
    static func entryName(key: CacheKey, vary: [String: String]) -> EntryName {
        if vary.isEmpty { return EntryName(hashing: key.url) }
        let secondary = vary.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        return EntryName(hashing: key.url + "\n" + secondary)
    }

    /// `directory/v1/ab/cd/name` for a name `abcd…`.
    func path(forName name: EntryName) -> String {
        directory + "/v1/" + relativePath(forName: name)
    }

    /// `ab/cd/name` (inside `v1/`) for a name `abcd…`, built in one allocation: every disk lookup
    /// and store needs one.
    func relativePath(forName name: EntryName) -> String {
        String(unsafeUninitializedCapacity: 38) { path in
            // The name goes in after the six bytes of `ab/cd/`, which are then copied from it.
            name.write(into: UnsafeMutableBufferPointer(rebasing: path[6..<38]))
            path[0] = path[6]
            path[1] = path[7]
            path[2] = UInt8(ascii: "/")
            path[3] = path[8]
            path[4] = path[9]
            path[5] = UInt8(ascii: "/")
            return 38
        }
    }
}

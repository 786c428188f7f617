import LarderConfig
import LarderHTTP
import LarderIO
import Logging

/// The cache's one face: the memory tier in front of the disk tier. Lookups go to memory, then
/// disk, and a disk hit small enough for memory is promoted; stores, 304 refreshes,
/// invalidations and purges reach both tiers. It also decides where a complete entry is
/// written: by the calling event loop while the disk is fast, else by the writer thread.
///
/// State: the tiers are thread-safe on their own; the doorkeeper is behind its own lock.
public final class TieredCache: Sendable {
    /// The tiers, reached only through this type from outside the cache.
    let memory: MemoryCache
    /// nil when the disk directory could not be set up (memory only).
    let disk: DiskCache?
    /// Keys that missed once, for `cache.admission = "second_request"`.
    let doorkeeper = Locked(Doorkeeper())
    /// Responses the doorkeeper kept out (stored on a later request, if any).
    public let admissionsDeferred = AtomicCounter()
    /// Where bodies moved to memory files on their first hit take their place.
    let memoryFiles: MemoryFileBudget
    /// Slices an origin sends in parts, waiting for their next part.
    let assemblies = SliceAssemblies()
    /// The operator's purges and bans, for stores that began before them: the disk tier's,
    /// which it asks itself.
    let invalidations: InvalidationLog

    public init(memory: MemoryCache, disk: DiskCache?, memoryFiles: MemoryFileBudget = .shared) {
        self.memory = memory
        self.disk = disk
        invalidations = disk?.invalidations ?? InvalidationLog()
        self.memoryFiles = memoryFiles
        // An older response refused by the disk tier went into memory first: it goes too, so
        // both tiers answer with the one that arrived later.
        disk?.whenSuperseded.withLock {
            $0 = { [memory] refused in memory.remove(refused.key, variant: refused.vary, unlessArrivedAfter: refused.responseTime) }
        }
    }

    /// What a lookup found.
    public enum Lookup {
        /// A stored variant for the request; `fromDisk` when the disk tier held it.
        case found(StoredResponse, fromDisk: Bool)
        /// Nothing stored for this request; `varyMiss` when other variants of the URL are.
        case miss(varyMiss: Bool)
        /// A disk entry that must be checked first (``verify(_:key:completion:)``), then looked
        /// up again with the check's outcome.
        case pending(name: EntryName)
    }

    /// The stored variant for a request with `headers`: memory first, then disk. `checked` is
    /// what ``verify(_:key:completion:)`` just found for this request: a sound entry is served
    /// from the bytes it checked; after any other outcome the disk tier is a miss for this
    /// lookup (it neither looks for an entry the start-up scan has not indexed, nor sends one
    /// to the reader thread again), so a request goes to the reader thread at most once per
    /// lookup.
    public func lookup(_ key: CacheKey, request headers: HTTPHeaders, checked: DiskCache.Verification? = nil) -> Lookup {
        let result = lookUpStored(key, request: headers, checked: checked)
        if case .found(let stored, _) = result, stored.directives.forbidsSharedStorage {
            // Kept by an older version, whose cache_first stored private and no-store answers
            // (RFC 9111 §3, §5.2.2.7): one user's answer must never reach another. Dropped.
            invalidate(stored)
            return .miss(varyMiss: false)
        }
        return result
    }

    @inline(__always)
    private func lookUpStored(_ key: CacheKey, request headers: HTTPHeaders, checked: DiskCache.Verification?) -> Lookup {
        var varyMiss = false
        if let variants = memory.lookup(key) {
            if let stored = variants.first(where: { VaryMatcher.matches($0, request: headers) }) {
                if stored.hits.add(1, ordering: .relaxed).newValue == 1 { moveBodyToFile(stored) }
                return .found(stored, fromDisk: false)
            }
            varyMiss = true
        }
        guard let disk else { return .miss(varyMiss: varyMiss) }
        if case .sound(let checked?, let since) = checked, checked.key == key, VaryMatcher.matches(checked, request: headers) {
            disk.countHit(checked)
            promote(checked, stamp: since)
            return .found(checked, fromDisk: true)
        }
        // Before the index is read: a purge after this keeps the promotion of what it finds out.
        let stamp = storeStamp()
        switch disk.lookup(key, request: headers, byName: checked == nil) {
        case .miss:
            return .miss(varyMiss: varyMiss)
        case .unverified(let name):
            // Once per check: an entry the reader thread could not read for this request (out
            // of descriptors, replaced meanwhile) is not sent back to it, or the request would
            // go round between the loop and the reader for as long as that lasts.
            return checked == nil ? .pending(name: name) : .miss(varyMiss: varyMiss)
        case .hit(let stored):
            disk.countHit(stored)
            promote(stored, stamp: stamp)
            return .found(stored, fromDisk: true)
        }
    }

    /// On its first hit, a large body stored as the array it arrived in moves to an anonymous
    /// memory file, which later hits send with `sendfile` instead of copying it into the socket
    /// each time (``MemoryFileBudget/fileSizes``); a response never asked for again
    /// never pays for the file. Only the lookup that takes the count to 1 (one thread) moves it,
    /// on the disk tier's reader thread so that no event loop waits for the file's pages (inline
    /// without a disk tier, and then only bodies under ``inlineMoveLimit``: a loop copying
    /// 16 MiB would hold up every client on it); hits until then send the array. The copy
    /// replaces the entry only if nothing replaced it meanwhile.
    static let inlineMoveLimit = 1024 * 1024

    private func moveBodyToFile(_ stored: StoredResponse) {
        guard case .memory(let bytes) = stored.body, memoryFiles.fileSizes.contains(bytes.count),
            disk != nil || bytes.count < TieredCache.inlineMoveLimit
        else { return }
        let memory = self.memory
        let budget = memoryFiles
        let move: @Sendable () -> Void = {
            let body = StoredResponse.Body.inMemory(bytes, budget: budget)
            guard case .memoryFile = body else { return }  // no place left for another file
            let moved = stored.withBody(body)
            moved.hits.store(stored.hits.load(ordering: .relaxed), ordering: .relaxed)
            memory.replace(stored, with: moved)
        }
        if let disk { disk.reader.submit(move) } else { move() }
    }

    /// Checks the disk entry `name` of `key` on the reader thread; `completion` runs there. A
    /// sound outcome carries a stamp taken now, before the check reads the index, for the
    /// promotion of the entry the lookup after it makes.
    public func verify(_ name: EntryName, key: CacheKey, completion: @escaping @Sendable (DiskCache.Verification) -> Void) {
        guard let disk else { return completion(.dropped) }
        disk.verify(name, key: key, stamp: storeStamp(), completion: completion)
    }

    /// Reads and checks one block of a disk-tier body (``DiskCache/readBlock(of:block:completion:)``);
    /// `completion` runs on the reader thread.
    public func readBlock(of stored: StoredResponse, block: Int, completion: @escaping @Sendable (DiskCache.BlockRead) -> Void) {
        guard let disk else { return completion(.failed) }
        disk.readBlock(of: stored, block: block, completion: completion)
    }

    /// Puts a disk entry small enough for the memory tier into it: at once when its body is
    /// already in memory, else read (and checked) on the reader thread, unless that version is
    /// in memory by then, or a purge or ban since `stamp` covers it. `stamp` must be taken
    /// before the index lookup that found `stored` (nil: none is refused). `replacing`: a
    /// refresh's condition (``MemoryCache/insert(_:admittedBy:since:stillStored:replacing:)``),
    /// asked in place of the check that the disk tier still holds the entry read.
    public func promote(
        _ stored: StoredResponse, stamp: InvalidationLog.Stamp?, replacing: (@Sendable (StoredResponse?) -> Bool)? = nil
    ) {
        guard fitsInMemory(stored) else { return }
        guard let disk else {
            if stored.isInMemory { memory.insert(stored, admittedBy: invalidations, since: stamp, replacing: replacing) }
            return
        }
        // A hit's copy stays on disk when the key has a more recent response there that a
        // request may match as well (a variant on other fields, or none): in memory, the older
        // one would be found first by every request both match, and the newer one never looked
        // for (RFC 9111 §4.1). Variants of one field (Accept-Encoding) never overlap.
        if replacing == nil, disk.holdsMoreRecentResponse(than: stored) { return }
        // Lands only while the disk tier holds the entry it was read from: a removal of it
        // (by any client's invalidation, not only the operator's) or a newer version stored
        // under its name since wins. Removals take the disk copy first, then the memory one.
        let stillStored = replacing == nil ? disk.stillHolds(stored) : nil
        if stored.isInMemory {
            memory.insert(stored, admittedBy: invalidations, since: stamp, stillStored: stillStored, replacing: replacing)
            return
        }
        let memory = self.memory
        // Concurrent disk hits each ask for the promotion; the version read first is enough (a
        // slice is 8 MiB to read and check).
        let held: @Sendable () -> Bool = {
            memory.lookup(stored.key)?.contains { $0.varyValues == stored.varyValues && $0.responseTime == stored.responseTime }
                ?? false
        }
        let invalidations = self.invalidations
        disk.readIntoMemory(stored, unless: held) { promoted in
            if let promoted {
                memory.insert(promoted, admittedBy: invalidations, since: stamp, stillStored: stillStored, replacing: replacing)
            }
        }
    }

    /// Whether `stored` may enter the memory tier: within `memory.max_object_bytes`, a slice
    /// counted as its whole object (from its Content-Range), so that a large file's slices stay
    /// on disk rather than crowd out the tier slice by slice.
    func fitsInMemory(_ stored: StoredResponse) -> Bool {
        let limit = memory.limits.maxObjectBytes
        guard stored.bodyLength <= limit else { return false }
        guard stored.key.isSlice else { return true }
        guard let range = stored.headers["Content-Range"].flatMap(ContentRange.init) else { return false }
        return range.length <= limit
    }

    /// Whether a storable response for `key`, of `length` bytes (nil: not declared), is stored
    /// on this request. Under ``AdmissionPolicy/secondRequest`` a response over `minBytes` waits
    /// for its second miss within the doorkeeper's window, but only while the tier that keeps
    /// everything is full: while there is room, storing evicts nothing.
    public func admits(_ key: CacheKey, length: Int?, policy: AdmissionPolicy, minBytes: Int) -> Bool {
        guard policy == .secondRequest, length.map({ $0 > minBytes }) ?? true, isFull else { return true }
        let disk = self.disk
        let memory = self.memory
        let admitted = doorkeeper.withLock { doorkeeper in
            doorkeeper.admit(key.hashValue) { disk?.statistics.entries ?? memory.statistics.entries }
        }
        if !admitted { admissionsDeferred.add(1) }
        return admitted
    }

    /// Whether the tier that keeps every entry (disk, else memory) is full: storing more means
    /// evicting.
    var isFull: Bool { disk?.isFull ?? memory.isFull }

    /// Stores a complete response whose body is in memory into the memory tier, unless a purge
    /// or ban since `stamp` covers it.
    public func insertInMemory(_ stored: StoredResponse, stamp: InvalidationLog.Stamp? = nil) {
        memory.insert(stored, admittedBy: invalidations, since: stamp)
    }

    /// Starts the disk tier's threads (its index scan, writer, reader and scrubber).
    public func start() { disk?.start() }

    /// Stops the disk tier's threads once their queued work is done.
    public func stop() { disk?.stop() }

    /// Applies the tiers' limits and the scrubber's rate from a (re)loaded configuration.
    public func setLimits(memory memoryLimits: MemoryCache.Limits, disk diskLimits: DiskCache.Limits, scrubRate: Int64) {
        memory.setLimits(memoryLimits)
        disk?.setLimits(diskLimits)
        disk?.scrubber.rate.store(scrubRate, ordering: .relaxed)
    }

    /// The memory tier's figures.
    public var memoryStatistics: MemoryCache.Statistics { memory.statistics }

    /// The disk tier's figures, its directory and the bytes its scrubber checked; nil without one.
    public var diskStatistics: (figures: DiskCache.Statistics, directory: String, scrubbedBytes: Int)? {
        disk.map { ($0.statistics, $0.directory, $0.scrubber.checkedBytes.load()) }
    }

    /// Whether the disk tier's index holds every entry on disk (its scan is done); true without one.
    public var isIndexComplete: Bool { disk?.isIndexComplete ?? true }

    /// The disk tier's directory while it refuses writes after an error; nil otherwise.
    public var degradedDiskDirectory: String? {
        guard let disk, disk.isDegraded else { return nil }
        return disk.directory
    }

    /// The largest object the disk tier takes (`disk.max_object_bytes`); nil without one. A
    /// sliced object counts whole: its slices are not a way around the limit.
    public var maxDiskObjectBytes: Int64? { disk?.currentLimits.maxObjectBytes }

    /// Starts streaming a body to the disk tier (nil: no disk, or it refuses the entry); it is
    /// not indexed if a purge or ban since `stamp` covers `key`, or a response to another fill
    /// of the variant that arrived later is stored by then. The variant's copy in memory, of the
    /// version it replaces, goes once it is indexed (a refresh too large for memory left the old
    /// small copy answering for good), unless that copy arrived later; the key's other variants
    /// stay. A promotion of the replaced version that began before lands either before (and
    /// goes) or after (and finds its entry replaced).
    public func beginDiskWrite(
        key: CacheKey, head: DiskEntryFormat.Head, expectedLength: Int?, stamp: InvalidationLog.Stamp? = nil
    ) -> DiskWrite? {
        let memory = self.memory
        let (vary, responseTime) = (head.vary, head.responseTime)
        return disk?.beginWrite(
            key: key, head: head, expectedLength: expectedLength, stamp: stamp,
            whenIndexed: { memory.remove(key, overlapping: vary, unlessArrivedAfter: responseTime) })
    }

    /// A complete response waiting to be written to disk (``storeOnDisk(_:budgetNanos:)``);
    /// not indexed if a purge or ban since `stamp` covers it.
    public struct PendingStore {
        public let response: StoredResponse
        public let body: [UInt8]
        public let head: DiskEntryFormat.Head
        public let stamp: InvalidationLog.Stamp?
        public init(response: StoredResponse, body: [UInt8], head: DiskEntryFormat.Head, stamp: InvalidationLog.Stamp? = nil) {
            self.response = response
            self.body = body
            self.head = head
            self.stamp = stamp
        }
    }

    /// Writes complete responses to disk: on the calling thread (an event loop, after it sent
    /// its batch's responses) for at most `budgetNanos` and while the disk stays fast, the rest
    /// by the writer thread, woken once. On a busy core the hand-off to the writer costs more
    /// in wake-ups than a small entry's file calls.
    public func storeOnDisk(_ stores: [PendingStore], budgetNanos: UInt64) {
        guard let disk, !stores.isEmpty else { return }
        let left = disk.storeInline(stores, budgetNanos: budgetNanos)
        // By position: a store taken out of the array is a copy of each of its references.
        for position in left.indices {
            disk.store(
                left[position].response, body: left[position].body, head: left[position].head, wakeWriter: false,
                stamp: left[position].stamp)
        }
        if !left.isEmpty { disk.wakeWriter() }
    }

    /// A stored response freshened by a 304 or a matching HEAD (RFC 9111 §4.3.4, §4.3.5): the
    /// new fields and times replace `original`'s, the response validated, in both tiers, in
    /// each only while it holds that very body (another one of the variant, stored since by a
    /// fetch that did not join the validation, is not the one the validator selected: its body
    /// under `original`'s fields would be neither, whatever validators the two share). Memory
    /// takes it in place of a copy with `original`'s body (``StoredResponse/holdsBody(of:)``:
    /// `original`, or a refresh of it by this or an overlapping validation) unless that copy
    /// was refreshed later, and with no copy only when the disk tier's entry has that body
    /// (none: the response validated was removed meanwhile, by an unsafe method's invalidation,
    /// and is not to come back), asked under its lock; by body, not by the disk serial a
    /// promoted copy keeps, which a refresh of the disk entry outdates. `promoting`:
    /// a disk entry small enough is read into memory too (a 304 answers clients now; a HEAD
    /// does not). Nothing is stored when a purge or ban since `stamp`, when the revalidation
    /// began, covers it.
    public func refresh(
        _ updated: StoredResponse, of original: StoredResponse, promoting: Bool, stamp: InvalidationLog.Stamp? = nil
    ) {
        let onDisk = disk?.holdsBody(of: original)
        let replacing: @Sendable (StoredResponse?) -> Bool = { held in
            guard let held else { return onDisk?() ?? false }
            return held.holdsBody(of: original)
        }
        if promoting {
            promote(updated, stamp: stamp, replacing: replacing)
        } else if updated.isInMemory {
            memory.insert(updated, admittedBy: invalidations, since: stamp, replacing: replacing)
        }
        disk?.refresh(updated, of: original, stamp: stamp)
    }

    /// Drops one stored variant the origin showed to be outdated.
    public func invalidate(_ stored: StoredResponse) {
        disk?.remove(stored)
        memory.remove(stored)
    }

    /// Whether any slice may be stored: false until the disk tier indexes its first slice
    /// entry (slices are disk-only), a lock-free check that lets plain misses skip the probe.
    public var mayHoldSlices: Bool { (disk?.slicesInserted.load() ?? 0) > 0 }

    /// Whether either tier holds something for `key` (a probe: no file is read, nothing is
    /// checked for freshness).
    public func holds(_ key: CacheKey) -> Bool {
        memory.lookup(key) != nil || disk?.isIndexed(key) == true
    }

    /// Removes every stored variant of `key` from both tiers; whether anything was stored.
    /// That key alone, and unrecorded: for one slice, or a copy found unusable. An object with
    /// its slices is ``invalidateObject(_:keepingSlice:)``; the operator's purge, which also
    /// keeps what is in flight from storing, is ``purgeObject(_:slicesBelow:)``.
    @discardableResult
    public func purge(_ key: CacheKey) -> Bool {
        // Disk first: a promotion landing after this finds its entry gone (``promote(_:stamp:)``).
        let onDisk = disk?.purge(key) ?? false
        let inMemory = memory.remove(key)
        return inMemory || onDisk
    }

    /// Removes what is stored under `key` and every slice stored of that object (keys of their
    /// own, ``CacheKey/slice(_:)``), found through each tier's table of slices; whether any of
    /// it was stored. The invalidation of RFC 9111 §4.4, and the heart of a purge. `keeping`:
    /// one slice to leave (the one an origin's changed answer just gave).
    @discardableResult
    public func invalidateObject(_ key: CacheKey, keepingSlice keeping: Int? = nil) -> Bool {
        var found = purge(key)
        guard mayHoldSlices else { return found }
        let kept = keeping.map { key.slice($0) }
        if disk?.purgeSlices(of: key, keeping: kept) == true { found = true }
        if memory.removeSlices(of: key, keeping: kept) { found = true }
        return found
    }

    /// The operator's purge of an object (the admin API): ``invalidateObject(_:)``, recorded
    /// before and after (``InvalidationLog/invalidate(_:during:)``), so that a fill, revalidation or promotion of the object
    /// that began before this does not store after it. While the start-up scan runs, slices it
    /// has not indexed yet are also looked for by number, below `slices` (one probe each, and a
    /// tombstone: callers bound it by the largest object the slice size allows, and run this
    /// off the event loops).
    @discardableResult
    public func purgeObject(_ key: CacheKey, slicesBelow slices: Int) -> Bool {
        invalidations.invalidate(.object(key.url)) {
            var found = invalidateObject(key)
            if !isIndexComplete {
                for index in 0..<max(0, slices) where purge(key.slice(index)) { found = true }
            }
            return found
        }
    }

    /// A stamp for a store whose fetch begins now (``InvalidationLog``).
    public func storeStamp() -> InvalidationLog.Stamp { invalidations.stamp() }

    /// Whether no purge or ban since `stamp` covers `key`: what a fetch begun then gets is
    /// still what the operator wants served and stored. Lock-free while none was recorded.
    public func isCurrent(_ key: CacheKey, since stamp: InvalidationLog.Stamp) -> Bool {
        invalidations.allows(key, since: stamp)
    }

    /// Removes, from both tiers, every stored response whose key `matches` (a ban: eager, done
    /// when this returns, apart from the disk files the writer thread deletes after; recorded
    /// before and after, as ``purgeObject(_:slicesBelow:)``). Returns how many distinct keys were stored.
    public func remove(matching matches: @escaping @Sendable (CacheKey) -> Bool) -> Int {
        invalidations.invalidate(.matching(matches)) {
            var keys = Set(disk?.remove(matching: matches) ?? [])
            for key in memory.remove(matching: matches) { keys.insert(key) }
            return keys.count
        }
    }

    /// A stored variant as ``list(prefix:limit:now:)`` reports it.
    public struct Listing: Sendable, Equatable {
        public let key: CacheKey
        /// The request header values this variant was selected by (RFC 9111 §4.1).
        public let vary: [String: String]
        /// The body's length in memory, else the entry's bytes on disk (head and body).
        public let bytes: Int64
        public let inMemory: Bool
        public let onDisk: Bool
        /// Its current age and what is left of its freshness lifetime (RFC 9111 §4.2), in
        /// seconds; nil when its head could not be read.
        public let age: Double?
        public let ttl: Double?
        /// Lookups that found it, in either tier, since this process started.
        public let hits: Int
        /// The URL it was fetched from when its key is not the URL (``StoredResponse/url``).
        public var url: String? = nil
        /// Its status; nil when its head could not be read.
        public var status: Int? = nil
    }

    /// Stored variants whose URL starts with `prefix` (with `exactly`, is it), at most `limit`,
    /// sorted by URL: each once,
    /// with the tiers holding it, its age and freshness at wall time `now`, and its hits. Neither
    /// tier is stalled for the whole walk (see ``MemoryCache/list(prefix:limit:)``), so this is a
    /// listing, not a snapshot. A variant only on disk has its head read for its age (one small
    /// read each, as a disk hit does): call this off the event loops.
    public func list(prefix: String, exactly: Bool = false, limit: Int, now: Double) -> [Listing] {
        guard limit > 0 else { return [] }
        struct Variant: Hashable {
            let url: String
            let vary: [String: String]
        }
        var inMemory: [Variant: StoredResponse] = [:]
        for stored in memory.list(prefix: prefix, exactly: exactly, limit: limit) {
            inMemory[Variant(url: stored.key.url, vary: stored.varyValues)] = stored
        }
        // `stored`: the variant in memory, or its head read from disk.
        func listing(
            _ stored: StoredResponse?, entry: (key: CacheKey, vary: [String: String], bytes: Int64), inMemory: Bool, onDisk: Bool,
            diskHits: Int
        ) -> Listing {
            let age = stored.map { $0.currentAge(now: now) }
            let memoryHits = inMemory ? stored?.hits.load(ordering: .relaxed) ?? 0 : 0
            return Listing(
                key: entry.key, vary: entry.vary, bytes: entry.bytes, inMemory: inMemory, onDisk: onDisk, age: age,
                ttl: stored.flatMap { stored in age.map { stored.freshnessLifetime - $0 } }, hits: memoryHits + diskHits,
                url: stored?.url, status: stored?.status)
        }
        var listed: [Variant: Listing] = [:]
        // Twice the limit: entries also in memory leave room for those only on disk.
        for entry in disk?.list(prefix: prefix, exactly: exactly, limit: 2 * limit) ?? [] {
            let variant = Variant(url: entry.key.url, vary: entry.vary)
            if let stored = inMemory[variant] {
                listed[variant] = listing(
                    stored, entry: (entry.key, entry.vary, Int64(stored.bodyLength)), inMemory: true, onDisk: true, diskHits: entry.hits)
            } else {
                listed[variant] = listing(
                    disk?.head(of: entry), entry: (entry.key, entry.vary, entry.bytes), inMemory: false, onDisk: true,
                    diskHits: entry.hits)
            }
        }
        for (variant, stored) in inMemory where listed[variant] == nil {
            listed[variant] = listing(
                stored, entry: (stored.key, stored.varyValues, Int64(stored.bodyLength)), inMemory: true, onDisk: false, diskHits: 0)
        }
        let sorted = listed.values.sorted {
            $0.key.url != $1.key.url ? $0.key.url < $1.key.url : $0.vary.sorted(by: <).description < $1.vary.sorted(by: <).description
        }
        return Array(sorted.prefix(limit))
    }

    /// Empties both tiers (recorded before and after, as ``purgeObject(_:slicesBelow:)``).
    public func removeAll() {
        invalidations.invalidate(.matching { _ in true }) {
            disk?.removeAll()
            memory.removeAll()
        }
    }
}

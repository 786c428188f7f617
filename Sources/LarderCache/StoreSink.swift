import LarderHTTP
import LarderIO

/// The fill's one way into the cache for the response it receives, opened from its
/// ``StoragePlan`` by ``TieredCache/open(_:head:cacheControl:entry:)``: it keeps the body
/// whole and stores it once complete, or owns the disk write the body streams to (a file of
/// the entry's own, or one per slice). The fill hands it each chunk as it arrives and the
/// end; it never picks a tier.
///
/// State: loop-confined to the fill's loop, held by the fill as a value (opening one that
/// stores allocates its ``Parts`` and the disk writes it starts).
public struct StoreSink {
    /// What the entry is stored as, beyond the response head.
    public struct Entry: Sendable {
        public var key: CacheKey
        /// The URL it was fetched from when the key is not the URL (``StoredResponse/url``).
        public var url: String?
        /// The headers of the request it answers (its Vary values).
        public var requestHeaders: HTTPHeaders
        public var requestTime: Double
        public var responseTime: Double
        /// The body's declared length (nil: unknown).
        public var contentLength: Int?
        /// A slice fill's slice index, and the slice size whole objects are cut into.
        public var sliceIndex: Int?
        public var sliceSize: Int
        /// When the fetch began (``TieredCache/storeStamp()``): what a purge or ban since
        /// covers is not stored.
        public var stamp: InvalidationLog.Stamp?
        /// A whole response stored slice by slice (``StoragePlan/Action/slices``) that is the
        /// object whose slices are stored already (the same strong ETag and length): they
        /// stay, each replaced as its new copy completes, instead of being dropped first.
        public var keepsSlices: Bool

        public init(
            key: CacheKey, url: String?, requestHeaders: HTTPHeaders, requestTime: Double, responseTime: Double, contentLength: Int?,
            sliceIndex: Int? = nil, sliceSize: Int = 0, stamp: InvalidationLog.Stamp? = nil, keepsSlices: Bool = false
        ) {
            self.key = key
            self.url = url
            self.requestHeaders = requestHeaders
            self.requestTime = requestTime
            self.responseTime = responseTime
            self.contentLength = contentLength
            self.sliceIndex = sliceIndex
            self.sliceSize = sliceSize
            self.stamp = stamp
            self.keepsSlices = keepsSlices
        }
    }

    /// What a body kept whole is stored with, worked out once when the head came (so
    /// Cache-Control and the dates are not parsed again when it is stored), with the
    /// stored head in wire form (status line, stored fields, Via), serialized once for the
    /// memory entry, its disk entry and, where they match, the clients' heads. A class: read
    /// when the body ends and for each reader's head, where a value would be copied field by
    /// field each time.
    final class WholeEntry {
        let status: Int
        let reason: String
        let cacheControl: CacheControl
        let lifetime: Double
        /// RFC 9111 §4.2.3, from the origin's fields (Age included; the stored ones drop it).
        let initialAge: Double
        let vary: [String: String]
        let headers: HTTPHeaders
        let head: StoredResponse.PreparedHead
        /// Whether `head` is also what clients are sent before their own fields: the forwarded
        /// fields are the stored ones (no `Age` was dropped).
        let isClientHead: Bool

        init(
            status: Int, reason: String, cacheControl: CacheControl, lifetime: Double, initialAge: Double, vary: [String: String],
            headers: HTTPHeaders, head: StoredResponse.PreparedHead, isClientHead: Bool
        ) {
            self.status = status
            self.reason = reason
            self.cacheControl = cacheControl
            self.lifetime = lifetime
            self.initialAge = initialAge
            self.vary = vary
            self.headers = headers
            self.head = head
            self.isClientHead = isClientHead
        }
    }

    /// What the response is stored as, by reference: the sink is a value inside its fill, and
    /// these parts are large enough that moving them with it cost a miss more than allocating
    /// them once. Shared by copies of the sink, which nothing makes.
    final class Parts {
        let entry: Entry
        /// What a body kept whole is stored with.
        let whole: WholeEntry?
        /// The disk head of a body kept whole, written in one piece when complete (one append
        /// per miss instead of a write per chunk).
        var pendingDiskHead: DiskEntryFormat.Head?
        /// A part of a slice sent in parts: this body's place in the slice's assembly.
        var assembly: SliceAssemblies.Part?

        init(entry: Entry, whole: WholeEntry?, pendingDiskHead: DiskEntryFormat.Head?) {
            self.entry = entry
            self.whole = whole
            self.pendingDiskHead = pendingDiskHead
        }
    }

    let cache: TieredCache?
    let parts: Parts?
    /// Whether the response goes to a tier when complete (decided when the head arrived).
    public internal(set) var stores = false
    /// The body stays whole in the fill until it ends, to be stored in one piece.
    public internal(set) var keepsWhole = false
    /// A body of unknown length kept whole is streamed to disk once past this: the fill
    /// calls ``stopKeepingWhole(chunks:)``, once, before the chunk that takes it past.
    public let wholeLimit: Int
    /// The disk entry being written while the body streams (bodies larger than what is kept
    /// whole, declared or once past it), or one slice's.
    public internal(set) var diskWrite: DiskWrite?
    /// The slices being written instead, for a whole response larger than a slice.
    public internal(set) var slicedWrite: SlicedDiskWrite?
    /// The whole slices inside a slice fill's answer for another range, written as they
    /// arrive; no reader of the fill follows their files.
    var rangeSlices: SlicedDiskWrite?

    /// A sink that stores nothing.
    public init() {
        cache = nil
        parts = nil
        wholeLimit = 0
    }

    init(cache: TieredCache, entry: Entry, wholeLimit: Int) {
        self.cache = cache
        parts = Parts(entry: entry, whole: nil, pendingDiskHead: nil)
        self.wholeLimit = wholeLimit
    }

    /// A sink that keeps the body whole, to be stored as `whole` (and on disk with
    /// `pendingDiskHead`, when there is a disk tier).
    init(cache: TieredCache, entry: Entry, wholeLimit: Int, whole: WholeEntry, pendingDiskHead: DiskEntryFormat.Head?) {
        self.cache = cache
        parts = Parts(entry: entry, whole: whole, pendingDiskHead: pendingDiskHead)
        self.wholeLimit = wholeLimit
        stores = true
        keepsWhole = true
    }

    /// The stored head, when clients are sent it too.
    public var preparedClientHead: StoredResponse.PreparedHead? {
        guard let whole = parts?.whole, whole.isClientHead else { return nil }
        return whole.head
    }

    /// A body of unknown length kept whole outgrew ``wholeLimit``: it streams to disk from
    /// here on, starting with `chunks` (every chunk the fill holds); the response is stored
    /// only if a disk tier takes it.
    public mutating func stopKeepingWhole(chunks: [[UInt8]]) {
        keepsWhole = false
        if let pendingDiskHead = parts?.pendingDiskHead.take() { startDiskWrite(pendingDiskHead, chunks: chunks) }
        stores = diskWrite != nil
    }

    /// Takes the body's next chunk into the writes it streams to. Nothing the fill reads
    /// changes: a body kept whole stays in the fill until ``finish(chunks:received:queue:)``.
    public mutating func append(_ chunk: [UInt8]) {
        diskWrite?.append(chunk)
        slicedWrite?.append(chunk)
        rangeSlices?.append(chunk)
        if let parts, parts.assembly != nil { parts.assembly?.append(chunk) }
    }

    mutating func startDiskWrite(_ head: DiskEntryFormat.Head, chunks: [[UInt8]]) {
        parts?.pendingDiskHead = nil
        guard let cache, let parts,
            let write = cache.beginDiskWrite(
                key: parts.entry.key, head: head, expectedLength: parts.entry.contentLength, stamp: parts.entry.stamp)
        else { return }
        for chunk in chunks { write.append(chunk) }
        diskWrite = write
    }

    /// The body arrived whole (`received` bytes, in `chunks`): a body kept whole is stored in
    /// memory (up to `memory.max_object_bytes`) and, last, queued for the disk tier on `queue`;
    /// a streamed one's file is completed.
    public mutating func finish(chunks: [[UInt8]], received: Int, queue: DiskStoreQueue) {
        diskWrite?.finish(expectedLength: received)
        // A slice's part: completes the slice when it wrote the slice's last byte.
        parts?.assembly.take()?.end(succeeded: true)
        // Read before close() drops it.
        let pendingDiskHead = parts?.pendingDiskHead.take()
        let keptWhole = keepsWhole
        close()
        if keptWhole, let cache, let parts, let whole = parts.whole {
            let body: [UInt8]
            if chunks.count == 1 {
                body = chunks[0]
            } else {
                var joined: [UInt8] = []
                joined.reserveCapacity(received)
                for chunk in chunks { joined.append(contentsOf: chunk) }
                body = joined
            }
            // The body stays in the array it arrived in: a large one moves to a memory file on
            // its first hit (TieredCache.lookup), so a response asked for once never pays for one.
            let stored = StoredResponse(
                key: parts.entry.key, url: parts.entry.url, status: whole.status, reason: whole.reason, headers: whole.headers,
                body: .memory(body), requestTime: parts.entry.requestTime, responseTime: parts.entry.responseTime,
                varyValues: whole.vary,
                freshnessLifetime: whole.lifetime, correctedInitialAge: whole.initialAge, cacheControl: whole.cacheControl,
                preparedHead: whole.head)
            let inMemory = cache.memory.insert(stored, admittedBy: cache.invalidations, since: parts.entry.stamp)
            // Moved to the queue, not copied: the head is large (`if let` without `consume` binds a copy).
            if let head = consume pendingDiskHead {
                // On disk only (too large for memory): the older variants in memory that its
                // requests may match would answer them first (RFC 9111 §4.1), as after a
                // streamed write (``TieredCache/beginDiskWrite(key:head:expectedLength:stamp:)``).
                if !inMemory { cache.memory.remove(stored.key, overlapping: stored.varyValues, unlessArrivedAfter: stored.responseTime) }
                queue.add(stored, body: body, head: head, stamp: parts.entry.stamp)
            }
        }
    }

    /// The transfer failed or was cancelled: the file being written is deleted, and the slice
    /// in progress (completed slices stay); nothing more is stored.
    public mutating func abort() {
        diskWrite?.abort()
        diskWrite = nil
        slicedWrite?.abortUnfinished()
        rangeSlices?.abortUnfinished()
        close()
    }

    /// A stale copy answers instead: what was streamed is not kept, nothing more is stored.
    public mutating func abandonStream() {
        diskWrite?.abort()
        diskWrite = nil
        close()
    }

    /// Nothing more is stored; the writes stay readable. Each way the sink ends (``finish(chunks:received:queue:)``,
    /// ``abort()``, ``abandonStream()``) closes it.
    mutating func close() {
        parts?.pendingDiskHead = nil
        keepsWhole = false
        // A part that did not end well: it writes no more (the slice's write goes only if
        // it wrote the last byte).
        parts?.assembly.take()?.end(succeeded: false)
    }
}

import LarderHTTP
import LarderIO

/// Slices an origin sends in parts (a server that caps ranges: each answer to a slice's
/// follow-up requests holds the next part of it), put back together into the slice's entry as
/// the parts arrive. The first part starts the slice's disk write, each later one continues
/// it, and the part that reaches the slice's end completes it; between parts the write waits
/// here, keyed by the slice. A part continues a write only when it starts at the byte the
/// write waits for and carries the same validators and object length (RFC 9111 §3.4: parts
/// combine only under one strong validator); anything else drops the write, so no entry is
/// ever made of two representations or of bytes at other positions.
///
/// Bounded: at most ``maxWaiting`` writes wait, none longer than ``maxWait`` seconds (each
/// loop's sweep calls ``TieredCache/expireSliceParts(now:)``).
///
/// State: the waiting writes behind their own lock (a slice's parts may arrive on different
/// loops); a write taken from here belongs to the fill that took it until it comes back.
public final class SliceAssemblies: Sendable {
    /// One slice being put back together: its disk write and what a next part must match.
    public struct Pending: Sendable {
        let key: CacheKey
        let write: DiskWrite
        /// The whole slice, as its entry's Content-Range says.
        let slice: ContentRange
        let etag: String?
        let lastModified: String?
        /// The object position of the next byte the write waits for.
        private(set) var next: Int
        /// A part held more than the slice's rest: the write is dropped.
        private(set) var overran = false

        init(key: CacheKey, write: DiskWrite, slice: ContentRange, headers: HTTPHeaders) {
            self.key = key
            self.write = write
            self.slice = slice
            etag = headers["ETag"]
            lastModified = headers["Last-Modified"]
            next = slice.first
        }

        /// Whether a part holding `range`, with these fields, is the one this write waits for.
        func continues(with range: ContentRange, headers: HTTPHeaders) -> Bool {
            range.first == next && range.last <= slice.last && range.length == slice.length && headers["ETag"] == etag
                && headers["Last-Modified"] == lastModified
        }

        /// The part's next bytes.
        mutating func append(_ chunk: [UInt8]) {
            guard !overran else { return }
            guard chunk.count <= slice.last + 1 - next else {
                overran = true
                return
            }
            write.append(chunk)
            next += chunk.count
        }

        /// Every byte of the slice is written.
        var isComplete: Bool { next == slice.last + 1 }
    }

    /// Slices waiting for their next part, with when each began waiting.
    private let waiting = Locked([CacheKey: (pending: Pending, since: Double)]())

    /// Writes that wait at most; past it the one waiting longest is dropped.
    static let maxWaiting = 64
    /// Seconds a write waits for its next part before it is dropped.
    static let maxWait = 60.0

    public init() {}

    /// The write of slice `key` waiting for a part holding `range` with `headers`, taken from
    /// here (nil when none waits). One that waits for another part is dropped: the slice
    /// starts again from its first part.
    func take(_ key: CacheKey, for range: ContentRange, headers: HTTPHeaders, now: Double) -> Pending? {
        let found = waiting.withLock { $0.removeValue(forKey: key) }
        guard let found else { return nil }
        guard found.pending.continues(with: range, headers: headers), now - found.since <= SliceAssemblies.maxWait else {
            found.pending.write.abort()
            return nil
        }
        return found.pending
    }

    /// Drops the write waiting for slice `key`, if any: a new first part replaces it.
    func drop(_ key: CacheKey) {
        waiting.withLock { $0.removeValue(forKey: key) }?.pending.write.abort()
    }

    /// A part ended: the slice's entry is completed when it holds every byte, else its write
    /// waits here for the next part. A write that failed or overran is dropped.
    func settle(_ pending: Pending, now: Double) {
        if pending.overran || pending.write.hasFailed {
            pending.write.abort()
        } else if pending.isComplete {
            pending.write.finish(expectedLength: pending.slice.last - pending.slice.first + 1)
        } else {
            let dropped: [DiskWrite] = waiting.withLock { waiting in
                var dropped = SliceAssemblies.expired(&waiting, now: now)
                if let older = waiting.updateValue((pending, now), forKey: pending.key) { dropped.append(older.pending.write) }
                if waiting.count > SliceAssemblies.maxWaiting, let oldest = waiting.min(by: { $0.value.since < $1.value.since }) {
                    dropped.append(oldest.value.pending.write)
                    waiting[oldest.key] = nil
                }
                return dropped
            }
            for write in dropped { write.abort() }
        }
    }

    /// Drops the writes that waited longer than ``maxWait`` for their next part.
    func expire(now: Double) {
        let dropped = waiting.withLock { SliceAssemblies.expired(&$0, now: now) }
        for write in dropped { write.abort() }
    }

    private static func expired(_ waiting: inout [CacheKey: (pending: Pending, since: Double)], now: Double) -> [DiskWrite] {
        var dropped: [DiskWrite] = []
        for (key, entry) in waiting where now - entry.since > SliceAssemblies.maxWait {
            dropped.append(entry.pending.write)
            waiting[key] = nil
        }
        return dropped
    }

    /// How many writes wait for a part (tests).
    var count: Int { waiting.withLock { $0.count } }
}

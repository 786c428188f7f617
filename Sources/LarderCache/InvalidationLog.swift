import Synchronization

/// The operator's recent purges and bans, for the stores that began before them. A fill that
/// fetched a response before its URL was purged finishes after; storing it then would undo
/// the purge (its slices, its memory copy), and a revalidation in flight would bring the old
/// entry back the same way. Each store carries the ``Stamp`` taken when its fetch (or read)
/// began, and each tier asks ``allows(_:since:)`` under the lock its insert holds; a removal
/// is recorded before it runs and again once it is done (``invalidate(_:during:)``), so a
/// store either is in place when the removal reaches it, or sees a record newer than its
/// stamp and is skipped.
///
/// Only the admin API records (``TieredCache/purgeObject(_:slicesBelow:)``, bans, a clear):
/// the removals a client's request causes (an unsafe request's, RFC 9111 §4.4; a fill that
/// replaces an object's slices) do not, so that no client can keep other clients' fills from
/// storing. A promotion to memory does not need them: it lands only while the disk tier still
/// holds what it read (``StoredResponse/diskSerial``).
///
/// Bounded: a purge is kept by URL, the last ``exactPurges`` exactly and older ones as the
/// newest generation in their bucket of ``urlBuckets`` (a store is then refused, rarely, for a
/// purge of another URL in its bucket; nothing is forgotten); bans are the last ``capacity``,
/// and a stamp older than all of them allows nothing (its store is skipped, and a later
/// request fetches the response again).
public final class InvalidationLog: Sendable {
    /// When a store's fetch began, as far as this log is concerned: a plain number, copied
    /// with every store on the miss path without reference counting.
    public struct Stamp: Sendable, Equatable {
        let generation: UInt64
    }

    /// What a record covers.
    public enum Subject: Sendable {
        /// An object's key and the keys of its slices (``CacheKey/slice(_:)``).
        case object(String)
        /// Every key a ban's pattern matches.
        case matching(@Sendable (CacheKey) -> Bool)
    }

    /// Bans kept; an operator banning faster than fills finish loses only those fills' stores.
    public static let capacity = 1024
    /// Purged URLs kept exactly.
    static let exactPurges = 16_384
    /// Buckets for older purges: one refuses a store of an unrelated URL with about this in
    /// one chance (the hash is seeded per process).
    static let urlBuckets = 1 << 15

    private struct Ban {
        let generation: UInt64
        let matches: @Sendable (CacheKey) -> Bool
    }

    private struct State {
        var bans: [Ban] = []
        /// The newest generation dropped from `bans`: stamps before it know nothing.
        var forgottenThrough: UInt64 = 0
        /// Purged object URLs, each with the generation of its latest purge.
        var purged: [String: UInt64] = [:]
        /// The same purges in the order they came, stale ones (purged again since) included,
        /// from `purgedStart` on.
        var purgeOrder: [(url: String, generation: UInt64)] = []
        var purgedStart = 0
        /// By URL bucket, the newest generation of a purge no longer in `purged` (allocated at
        /// the first).
        var folded: [UInt64] = []
    }

    private let generation = Atomic<UInt64>(0)
    private let state = Mutex(State())

    public init() {}

    /// A stamp for a store whose fetch begins now.
    public func stamp() -> Stamp { Stamp(generation: generation.load(ordering: .acquiring)) }

    /// Records `subject`, runs `removal` (which takes each tier's lock in turn), and records it
    /// again: a revalidation whose stamp was taken while the removal ran may have read what it
    /// had not reached yet.
    public func invalidate<Result>(_ subject: Subject, during removal: () -> Result) -> Result {
        let first = state.withLock { record(subject, in: &$0) }
        let result = removal()
        state.withLock { state in
            // A ban is kept once, at its later generation.
            if case .matching = subject, let index = state.bans.lastIndex(where: { $0.generation == first }) {
                state.bans.remove(at: index)
            }
            _ = record(subject, in: &state)
        }
        return result
    }

    /// Whether a response for `key` fetched since `stamp` may be stored: no purge or ban that
    /// covers `key` has been recorded since (nil: no stamp, always). Lock-free while nothing was.
    public func allows(_ key: CacheKey, since stamp: Stamp?) -> Bool {
        guard let stamp = stamp?.generation, generation.load(ordering: .acquiring) != stamp else { return true }
        return state.withLock { state in
            guard state.forgottenThrough <= stamp else { return false }
            // A purge names an object, never one of its slices.
            let object = key.objectURL
            if let purged = state.purged[object], purged > stamp { return false }
            if !state.folded.isEmpty, state.folded[Self.bucket(object)] > stamp { return false }
            for ban in state.bans.reversed() {
                if ban.generation <= stamp { break }
                if ban.matches(key) { return false }
            }
            return true
        }
    }

    /// Appends a record at the next generation, under the lock; returns that generation.
    private func record(_ subject: Subject, in state: inout State) -> UInt64 {
        let next = generation.load(ordering: .relaxed) + 1
        switch subject {
        case .object(let url):
            state.purged[url] = next
            state.purgeOrder.append((url, next))
            Self.foldOldPurges(&state)
        case .matching(let matches):
            state.bans.append(Ban(generation: next, matches: matches))
            if state.bans.count > InvalidationLog.capacity {
                let excess = state.bans.count - InvalidationLog.capacity
                state.forgottenThrough = state.bans[excess - 1].generation
                state.bans.removeFirst(excess)
            }
        }
        generation.store(next, ordering: .releasing)
        return next
    }

    /// Moves the oldest exact purges past ``exactPurges`` into their buckets, and drops
    /// the order's stale and consumed entries once they are most of it.
    private static func foldOldPurges(_ state: inout State) {
        while state.purged.count > exactPurges {
            let (url, generation) = state.purgeOrder[state.purgedStart]
            state.purgedStart += 1
            guard state.purged[url] == generation else { continue }  // purged again since
            state.purged[url] = nil
            if state.folded.isEmpty { state.folded = Array(repeating: 0, count: urlBuckets) }
            state.folded[bucket(url)] = max(state.folded[bucket(url)], generation)
        }
        let live = state.purgeOrder.count - state.purgedStart
        if live > 2 * exactPurges {
            state.purgeOrder = state.purgeOrder[state.purgedStart...].filter { state.purged[$0.url] == $0.generation }
            state.purgedStart = 0
        } else if state.purgedStart > exactPurges {
            state.purgeOrder.removeFirst(state.purgedStart)
            state.purgedStart = 0
        }
    }

    private static func bucket(_ url: String) -> Int { url.hashValue & (urlBuckets - 1) }
}

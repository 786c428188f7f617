import Synchronization

/// The operator's recent purges and bans, for the stores that began before them. A fill that
/// fetched a response before its URL was purged finishes after; storing it then would undo
/// the purge (its slices, its memory copy), and a revalidation or a promotion in flight would
/// bring the old entry back the same way. Each store carries the ``Stamp`` taken when its
/// fetch (or read) began, and each tier asks ``allows(_:since:)`` under the lock its insert
/// holds; a purge records here before it removes anything under those locks, so either the
/// store is in place when the removal runs, or the store sees the record and is skipped.
///
/// Only the admin API records (``TieredCache/purge(_:)``, ``TieredCache/remove(matching:)``):
/// the invalidations a client's unsafe request causes (RFC 9111 §4.4) do not, so that no
/// client can push other clients' fills out of the log's reach and off the cache. Bounded:
/// the last ``capacity`` records; a stamp older than all of them allows nothing (its store is
/// skipped, and a later request fetches the response again).
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

        func covers(_ key: CacheKey) -> Bool {
            switch self {
            case .object(let url):
                // A request URL has no `#`, so only the object's own slices start this way.
                return key.url == url || key.url.hasPrefix(url + CacheKey.sliceMarker)
            case .matching(let matches):
                return matches(key)
            }
        }
    }

    /// Records kept; an operator purging faster than fills finish loses only those fills' stores.
    public static let capacity = 1024

    private struct Record {
        let generation: UInt64
        let subject: Subject
    }

    private struct State {
        var records: [Record] = []
        /// The newest generation dropped from `records`: stamps before it know nothing.
        var forgottenThrough: UInt64 = 0
    }

    private let generation = Atomic<UInt64>(0)
    private let state = Mutex(State())

    public init() {}

    /// A stamp for a store whose fetch begins now.
    public func stamp() -> Stamp { Stamp(generation: generation.load(ordering: .acquiring)) }

    /// Records a purge or a ban, before the tiers remove what it covers.
    public func record(_ subject: Subject) {
        state.withLock { state in
            let next = generation.load(ordering: .relaxed) + 1
            state.records.append(Record(generation: next, subject: subject))
            if state.records.count > InvalidationLog.capacity {
                let excess = state.records.count - InvalidationLog.capacity
                state.forgottenThrough = state.records[excess - 1].generation
                state.records.removeFirst(excess)
            }
            generation.store(next, ordering: .releasing)
        }
    }

    /// Whether a response for `key` fetched since `stamp` may be stored: no purge or ban that
    /// covers `key` has been recorded since (nil: no stamp, always). Lock-free while nothing was.
    public func allows(_ key: CacheKey, since stamp: Stamp?) -> Bool {
        guard let stamp = stamp?.generation, generation.load(ordering: .acquiring) != stamp else { return true }
        return state.withLock { state in
            guard state.forgottenThrough <= stamp else { return false }
            for record in state.records.reversed() {
                if record.generation <= stamp { break }
                if record.subject.covers(key) { return false }
            }
            return true
        }
    }
}

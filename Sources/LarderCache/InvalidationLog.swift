import Synchronization

/// What was removed from the cache recently, for the stores that began before. A fill that
/// fetched a response before its URL was purged finishes after; storing it then would undo
/// the purge (its slices, its memory copy), and a revalidation or a promotion in flight would
/// bring the old entry back the same way. Each store carries the ``Stamp`` taken when its
/// fetch (or read) began, and each tier asks ``allows(_:since:)`` under the lock its insert
/// holds; a removal is recorded before it runs and again once it is done
/// (``invalidate(_:during:)``), so a store either is in place when the removal reaches it, or
/// sees a record newer than its stamp and is skipped.
///
/// What records: the operator (``TieredCache/purgeObject(_:slicesBelow:)``, bans, a clear),
/// and a fill that replaces an object's slices (``renew(_:from:during:)``). The first cover any
/// key; a fill's cover only slice keys, so that no client, however many large objects it has
/// fetched, can keep other clients' whole responses out of the cache. The invalidations of a
/// client's unsafe request (RFC 9111 §4.4) are not recorded.
///
/// Bounded: bans are the last ``capacity`` (a stamp older than all of them allows nothing: its
/// store is skipped, and a later request fetches the response again); a URL's record is the
/// newest generation in its bucket of ``urlBuckets``, so a store is refused, rarely, for a
/// record of another URL in its bucket, and never forgotten.
public final class InvalidationLog: Sendable {
    /// When a store's fetch began, as far as this log is concerned: a plain number, copied
    /// with every store on the miss path without reference counting.
    public struct Stamp: Sendable, Equatable {
        let generation: UInt64
    }

    /// What a record covers.
    public enum Subject: Sendable {
        /// An object's key and the keys of its slices (``CacheKey/slice(_:)``): the operator's purge.
        case object(String)
        /// Every key a ban's pattern matches.
        case matching(@Sendable (CacheKey) -> Bool)
        /// Slice keys only: those of the object with this URL, or the one slice key it is.
        case slices(String)
    }

    /// Bans kept; an operator banning faster than fills finish loses only those fills' stores.
    public static let capacity = 1024
    /// Buckets of each table of URL records: a record refuses a store of an unrelated URL with
    /// about this in one chance (the hash is seeded per process, so a client cannot aim).
    static let urlBuckets = 1 << 15

    private struct Ban {
        let generation: UInt64
        let matches: @Sendable (CacheKey) -> Bool
    }

    private struct State {
        var bans: [Ban] = []
        /// The newest generation dropped from `bans`: stamps before it know nothing.
        var forgottenThrough: UInt64 = 0
        /// By URL bucket, the newest generation of an `.object` record (allocated at the first).
        var objects: [UInt64] = []
        /// The same for `.slices` records.
        var slices: [UInt64] = []
    }

    private let generation = Atomic<UInt64>(0)
    private let state = Mutex(State())

    public init() {}

    /// A stamp for a store whose fetch begins now.
    public func stamp() -> Stamp { Stamp(generation: generation.load(ordering: .acquiring)) }

    /// Records a purge or a ban, before the tiers remove what it covers (see
    /// ``invalidate(_:during:)`` for the removal itself).
    public func record(_ subject: Subject) {
        state.withLock { state in _ = record(subject, in: &state) }
    }

    /// Records `subject`, runs `removal` (which takes each tier's lock in turn), and records it
    /// again: a lookup that began during the removal read what the removal had not reached yet,
    /// and its promotion carries a stamp the second record refuses.
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

    /// For a fill whose fetch began at `stamp` and that is about to store `key` anew in slices
    /// (the object's URL: all of them; a slice key: that one): runs `removal` of the older
    /// copies between two records of `.slices(key.url)` (as ``invalidate(_:during:)``, so a
    /// promotion of an older slice in flight lands nowhere), and returns the stamp the fill's
    /// stores carry from now on. Nil, with nothing removed or recorded, when a record since
    /// `stamp` covers `key` (what the fill fetched was purged), or when one came during the
    /// removal: the fill then stores nothing.
    public func renew(_ key: CacheKey, from stamp: Stamp?, during removal: () -> Void) -> Stamp? {
        let subject = Subject.slices(key.url)
        let first: UInt64? = state.withLock { state in
            if let stamp, !allows(key, since: stamp.generation, in: state) { return nil }
            return record(subject, in: &state)
        }
        guard let first else { return nil }
        removal()
        return state.withLock { state in
            guard allows(key, since: first, in: state) else { return nil }
            return Stamp(generation: record(subject, in: &state))
        }
    }

    /// Whether a response for `key` fetched since `stamp` may be stored: no record since
    /// covers `key` (nil: no stamp, always). Lock-free while nothing was recorded.
    public func allows(_ key: CacheKey, since stamp: Stamp?) -> Bool {
        guard let stamp = stamp?.generation, generation.load(ordering: .acquiring) != stamp else { return true }
        return state.withLock { allows(key, since: stamp, in: $0) }
    }

    private func allows(_ key: CacheKey, since stamp: UInt64, in state: State) -> Bool {
        guard state.forgottenThrough <= stamp else { return false }
        let object = key.sliceObjectURL
        if !state.objects.isEmpty {
            if state.objects[Self.bucket(key.url)] > stamp { return false }
            if let object, state.objects[Self.bucket(object)] > stamp { return false }
        }
        if let object, !state.slices.isEmpty {
            if state.slices[Self.bucket(key.url)] > stamp || state.slices[Self.bucket(object)] > stamp { return false }
        }
        for ban in state.bans.reversed() {
            if ban.generation <= stamp { break }
            if ban.matches(key) { return false }
        }
        return true
    }

    /// Appends a record at the next generation, under the lock; returns that generation.
    private func record(_ subject: Subject, in state: inout State) -> UInt64 {
        let next = generation.load(ordering: .relaxed) + 1
        switch subject {
        case .object(let url):
            if state.objects.isEmpty { state.objects = Array(repeating: 0, count: Self.urlBuckets) }
            state.objects[Self.bucket(url)] = next
        case .slices(let url):
            if state.slices.isEmpty { state.slices = Array(repeating: 0, count: Self.urlBuckets) }
            state.slices[Self.bucket(url)] = next
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

    private static func bucket(_ url: String) -> Int { url.hashValue & (urlBuckets - 1) }
}

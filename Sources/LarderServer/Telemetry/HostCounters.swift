import LarderIO
import Synchronization

/// Requests, cache hits and bytes per origin host, for the dashboard's "top hosts" (and per
/// route, keyed by its name, port 0). Bounded:
/// past `capacity` hosts, the half with the fewest requests is dropped.
///
/// State: the table of slots is behind one mutex, taken when a connection asks for a host it
/// does not already hold; each slot's counts are relaxed atomics, so a connection that keeps
/// asking one host (the common case: a keep-alive connection to one origin) counts without a
/// lock or a hash. A dropped slot is marked so its
/// holders come back for a new one instead of counting into a slot nobody reads.
final class HostCounters: Sendable {
    /// A snapshot of one host's counts.
    struct Counts: Sendable {
        var requests = 0
        var hits = 0
        var bytes = 0
        /// Bytes of the hits: what the cache saved fetching.
        var savedBytes = 0
    }

    /// Host and port, kept apart so recording a request builds no string.
    struct Key: Hashable, Sendable {
        let host: String
        let port: Int
        let defaultPort: Int
        var name: String { port == defaultPort ? host : "\(host):\(port)" }
    }

    /// One host's live counts.
    final class Slot: Sendable {
        let key: Key
        fileprivate let requests = AtomicCounter()
        fileprivate let hits = AtomicCounter()
        fileprivate let bytes = AtomicCounter()
        fileprivate let savedBytes = AtomicCounter()
        fileprivate let dropped = Atomic<Bool>(false)

        fileprivate init(key: Key) { self.key = key }

        /// Whether this slot still counts for `host`:`port`.
        @inline(__always)
        func holds(host: String, port: Int) -> Bool {
            key.port == port && key.host == host && !dropped.load(ordering: .relaxed)
        }

        func record(hit: Bool, bytes: Int) {
            requests.add(1)
            if hit {
                hits.add(1)
                savedBytes.add(bytes)
            }
            self.bytes.add(bytes)
        }

        fileprivate var counts: Counts {
            Counts(requests: requests.load(), hits: hits.load(), bytes: bytes.load(), savedBytes: savedBytes.load())
        }
    }

    private let slots = Locked<[Key: Slot]>([:])
    private let capacity: Int

    init(capacity: Int = 1000) {
        self.capacity = capacity
    }

    /// The slot for `key`, made if it is new.
    func slot(for key: Key) -> Slot {
        slots.withLock { slots in
            if let slot = slots[key] { return slot }
            let slot = Slot(key: key)
            slots[key] = slot
            if slots.count > capacity {
                let ranked = slots.values.sorted { $0.requests.load() > $1.requests.load() }
                var kept: [Key: Slot] = [:]
                for (rank, candidate) in ranked.enumerated() {
                    // The new slot stays: its first request is about to be counted.
                    if rank < capacity / 2 || candidate === slot {
                        kept[candidate.key] = candidate
                    } else {
                        candidate.dropped.store(true, ordering: .relaxed)
                    }
                }
                slots = kept
            }
            return slot
        }
    }

    /// The `limit` hosts with the most requests.
    func top(_ limit: Int) -> [(host: String, counts: Counts)] {
        let counted = slots.withLock { slots in slots.values.map { ($0.key.name, $0.counts) } }
        return counted.sorted { $0.1.requests > $1.1.requests }.prefix(limit).map { ($0.0, $0.1) }
    }

    func removeAll() {
        slots.withLock { slots in
            for slot in slots.values { slot.dropped.store(true, ordering: .relaxed) }
            slots.removeAll()
        }
    }
}

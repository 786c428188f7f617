import Synchronization

/// Requests, cache hits and bytes per origin host, for the dashboard's "top hosts". Bounded:
/// past `capacity` hosts, the half with the fewest requests is dropped.
///
/// State: one mutex; one update per request (a hash probe).
final class HostCounters: Sendable {
    struct Counts: Sendable {
        var requests = 0
        var hits = 0
        var bytes = 0

        mutating func record(hit: Bool, bytes: Int) {
            requests += 1
            if hit { hits += 1 }
            self.bytes += bytes
        }
    }

    /// Host and port, kept apart so recording a request builds no string.
    struct Key: Hashable, Sendable {
        let host: String
        let port: Int
        let defaultPort: Int
        var name: String { port == defaultPort ? host : "\(host):\(port)" }
    }

    private let counts = Mutex<[Key: Counts]>([:])
    private let capacity: Int

    init(capacity: Int = 1000) {
        self.capacity = capacity
    }

    func record(_ host: Key, hit: Bool, bytes: Int) {
        counts.withLock { counts in
            // One hash probe: the entry is updated in place through the subscript's modify.
            counts[host, default: Counts()].record(hit: hit, bytes: bytes)
            if counts.count > capacity {
                let keep = counts.sorted { $0.value.requests > $1.value.requests }.prefix(capacity / 2)
                counts = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
            }
        }
    }

    /// The `limit` hosts with the most requests.
    func top(_ limit: Int) -> [(host: String, counts: Counts)] {
        counts.withLock { counts in
            counts.sorted { $0.value.requests > $1.value.requests }.prefix(limit).map { ($0.key.name, $0.value) }
        }
    }

    func removeAll() {
        counts.withLock { $0.removeAll() }
    }
}

import LarderIO

/// The last failed requests (`/stats` `recent_failures`, the dashboard's list): when, from which
/// client, what, the status and the access log's cause. Bounded to ``capacity``; the oldest goes first.
///
/// State: the ring is behind one mutex, taken only for a failure or a read of the list, never
/// for a request that succeeded.
final class RecentFailures: Sendable {
    /// One failure, its URL already redacted as the access log's (`log.redact_query`).
    struct Failure: Sendable, Equatable {
        var time: Double
        /// The client's address, without its port.
        var client: String
        var method: String
        var url: String
        var status: Int
        var cause: FailureCause
    }

    let capacity: Int
    private let ring: Locked<Ring<Failure>>

    init(capacity: Int = 20) {
        self.capacity = capacity
        ring = Locked(Ring(capacity: capacity))
    }

    func record(_ failure: Failure) {
        ring.withLock { $0.append(failure) }
    }

    /// Oldest first.
    var all: [Failure] { ring.withLock { $0.elements } }
}

/// A bounded ring of values: appending past `capacity` drops the oldest.
struct Ring<Element: Sendable>: Sendable {
    let capacity: Int
    private var storage: [Element] = []
    private var next = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        storage.reserveCapacity(capacity)
    }

    mutating func append(_ element: Element) {
        if storage.count < capacity {
            storage.append(element)
        } else {
            storage[next] = element
        }
        next = (next + 1) % capacity
    }

    /// Oldest first.
    var elements: [Element] {
        storage.count < capacity ? storage : Array(storage[next...] + storage[..<next])
    }

    var count: Int { storage.count }
}

import LarderIO

/// `larder_request_duration_seconds`: how long requests took, from the first byte of the
/// head to the last byte of the response queued, in the buckets the endpoint has always had.
///
/// Recorded on every request, so it is counted with relaxed atomics (one bucket and the sum)
/// rather than through swift-metrics into swift-prometheus's histogram, which took a mutex
/// and compared `Duration`s on every request. Rendered in the Prometheus text format next to
/// the registry's metrics.
///
/// State: atomics only, written by every event loop, read by scrapes without stopping the
/// writers. The count is the sum of the buckets read, so `+Inf` always equals `_count` and
/// the cumulative buckets never go down; `_sum` may be a request ahead or behind.
final class RequestDurationHistogram: Sendable {
    static let name = "larder_request_duration_seconds"
    static let help = "Time from a request's head to the last byte of its response queued."

    /// Upper bounds in nanoseconds with their `le` labels, ascending.
    private let bounds: [Int]
    private let labels: [String]
    /// One per bound, then one for everything above the last.
    private let buckets: [AtomicCounter]
    private let sumNanos = AtomicCounter()

    init() {
        let table: [(Int, String)] = [
            (100_000, "0.0001"), (250_000, "0.00025"), (500_000, "0.0005"), (1_000_000, "0.001"), (2_000_000, "0.002"),
            (5_000_000, "0.005"), (10_000_000, "0.01"), (25_000_000, "0.025"), (50_000_000, "0.05"),
            (100_000_000, "0.1"), (250_000_000, "0.25"), (500_000_000, "0.5"), (1_000_000_000, "1.0"),
            (2_000_000_000, "2.0"), (5_000_000_000, "5.0"), (10_000_000_000, "10.0"), (30_000_000_000, "30.0"),
        ]
        bounds = table.map(\.0)
        labels = table.map(\.1)
        buckets = (0...table.count).map { _ in AtomicCounter() }
    }

    /// Counts one request that took `nanoseconds`.
    func record(nanoseconds: UInt64) {
        let value = Int(clamping: nanoseconds)
        var index = 0
        // Most requests land in the first buckets: a scan from the bottom beats a binary search.
        while index < bounds.count && value > bounds[index] { index += 1 }
        buckets[index].add(1)
        sumNanos.add(value)
    }

    /// The series in the text exposition format (HELP, TYPE, cumulative buckets, sum, count).
    func render(into output: inout [UInt8]) {
        var text = "# HELP \(Self.name) \(Self.help)\n# TYPE \(Self.name) histogram\n"
        var cumulative = 0
        for index in bounds.indices {
            cumulative += buckets[index].load()
            text += "\(Self.name)_bucket{le=\"\(labels[index])\"} \(cumulative)\n"
        }
        cumulative += buckets[bounds.count].load()
        text += "\(Self.name)_bucket{le=\"+Inf\"} \(cumulative)\n"
        text += "\(Self.name)_sum \(Double(sumNanos.load()) / 1e9)\n"
        text += "\(Self.name)_count \(cumulative)\n"
        output.append(contentsOf: text.utf8)
    }
}

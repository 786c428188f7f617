import Synchronization

/// `larder_request_duration_seconds`: how long requests took, from the first byte of the
/// head to the last byte of the response queued, in the buckets the endpoint has always had.
///
/// Recorded on every request, so it is counted with relaxed atomics (one bucket and the sum)
/// rather than through swift-metrics into swift-prometheus's histogram, which took a mutex
/// and compared `Duration`s on every request. Rendered in the Prometheus text format next to
/// the registry's metrics.
///
/// Kept per ``Answer`` (hit, miss, other), so the dashboard can show hit and miss latency:
/// a request still adds to one bucket and one sum.
///
/// State: atomics only, written by every event loop, read by scrapes without stopping the
/// writers. The count is the sum of the buckets read, so `+Inf` always equals `_count` and
/// the cumulative buckets never go down; `_sum` may be a request ahead or behind. The atomics
/// live in one allocation the histogram owns and frees (hence `@unchecked`): recording takes
/// no retain of a counter object.
final class RequestDurationHistogram: @unchecked Sendable {
    static let name = "larder_request_duration_seconds"
    static let help = "Time from a request's head to the last byte of its response queued."
    /// The same durations apart by how the request was answered (``Answer``).
    static let byResultName = "larder_request_duration_by_result_seconds"
    static let byResultHelp = "Time from a request's head to the last byte of its response queued, by result: hit or miss."

    /// How a request was answered, for the latency a dashboard shows apart: from the cache
    /// alone, or after the origin (a miss, a coalesced wait, a revalidation).
    enum Answer: Int, CaseIterable, Sendable {
        case hit, miss, other

        init(_ outcome: RequestOutcome) {
            switch outcome {
            case .memoryHit, .diskHit: self = .hit
            case .miss, .coalesced, .revalidated, .stale: self = .miss
            case .error, .tunnel, .intercept, .admin: self = .other
            }
        }

        var label: String {
            switch self {
            case .hit: "hit"
            case .miss: "miss"
            case .other: "other"
            }
        }
    }

    /// Upper bounds in nanoseconds with their `le` labels, ascending.
    let bounds: [Int]
    private let labels: [String]
    /// ``bounds`` again, where recording reads them.
    private let limits: UnsafeMutablePointer<Int>
    /// Per result, one counter per bound, one for everything above the last, then the sum:
    /// result `r`'s bucket `i` is at `r * stride + i`, its sum at `r * stride + bounds.count + 1`.
    private let cells: UnsafeMutablePointer<Atomic<Int>>
    /// `bounds.count + 2`: how far apart two results' cells are.
    private let stride: Int

    init() {
        let table: [(Int, String)] = [
            (100_000, "0.0001"), (250_000, "0.00025"), (500_000, "0.0005"), (1_000_000, "0.001"), (2_000_000, "0.002"),
            (5_000_000, "0.005"), (10_000_000, "0.01"), (25_000_000, "0.025"), (50_000_000, "0.05"),
            (100_000_000, "0.1"), (250_000_000, "0.25"), (500_000_000, "0.5"), (1_000_000_000, "1.0"),
            (2_000_000_000, "2.0"), (5_000_000_000, "5.0"), (10_000_000_000, "10.0"), (30_000_000_000, "30.0"),
        ]
        bounds = table.map(\.0)
        labels = table.map(\.1)
        stride = table.count + 2
        limits = UnsafeMutablePointer.allocate(capacity: table.count)
        limits.initialize(from: bounds, count: table.count)
        let count = Answer.allCases.count * stride
        cells = UnsafeMutablePointer.allocate(capacity: count)
        for index in 0..<count { (cells + index).initialize(to: Atomic(0)) }
    }

    deinit {
        cells.deinitialize(count: Answer.allCases.count * stride)
        cells.deallocate()
        limits.deinitialize(count: bounds.count)
        limits.deallocate()
    }

    /// Counts one request that took `nanoseconds`, answered as `result`.
    func record(nanoseconds: UInt64, result: Answer = .other) {
        let value = Int(clamping: nanoseconds)
        // Most requests land in the first buckets: a scan from the bottom beats a binary search.
        let last = stride &- 2
        var index = 0
        while index < last && value > limits[index] { index &+= 1 }
        let base = result.rawValue &* stride
        cells[base &+ index].add(1, ordering: .relaxed)
        cells[base &+ last &+ 1].add(value, ordering: .relaxed)
    }

    /// The non-cumulative bucket counts of `results` added up (one per bound, then the rest).
    func counts(_ results: [Answer] = Answer.allCases) -> [Int] {
        var counts = [Int](repeating: 0, count: bounds.count + 1)
        for result in results {
            for index in counts.indices { counts[index] += cells[result.rawValue * stride + index].load(ordering: .relaxed) }
        }
        return counts
    }

    /// The series in the text exposition format (HELP, TYPE, cumulative buckets, sum, count):
    /// every request under the name it always had, then apart by result.
    func render(into output: inout [UInt8]) {
        var text = "# HELP \(Self.name) \(Self.help)\n# TYPE \(Self.name) histogram\n"
        append(Self.name, "", counts(), sum: Answer.allCases.reduce(0) { $0 + sum(of: $1) }, to: &text)
        text += "# HELP \(Self.byResultName) \(Self.byResultHelp)\n# TYPE \(Self.byResultName) histogram\n"
        for result in [Answer.hit, .miss] {
            append(Self.byResultName, "result=\"\(result.label)\",", counts([result]), sum: sum(of: result), to: &text)
        }
        output.append(contentsOf: text.utf8)
    }

    /// The nanoseconds recorded for `result`.
    private func sum(of result: Answer) -> Int {
        cells[result.rawValue * stride + bounds.count + 1].load(ordering: .relaxed)
    }

    private func append(_ name: String, _ label: String, _ counts: [Int], sum: Int, to text: inout String) {
        var cumulative = 0
        for index in bounds.indices {
            cumulative += counts[index]
            text += "\(name)_bucket{\(label)le=\"\(labels[index])\"} \(cumulative)\n"
        }
        cumulative += counts[bounds.count]
        text += "\(name)_bucket{\(label)le=\"+Inf\"} \(cumulative)\n"
        let labelSet = label.isEmpty ? "" : "{\(label.dropLast())}"
        text += "\(name)_sum\(labelSet) \(Double(sum) / 1e9)\n"
        text += "\(name)_count\(labelSet) \(cumulative)\n"
    }

    /// The `quantile` (0...1) of a histogram's non-cumulative `counts` over `bounds` (ns), in
    /// seconds, interpolated linearly within its bucket as Prometheus's `histogram_quantile`
    /// does; a quantile in the bucket above the last bound is that bound. nil without counts.
    static func quantile(_ quantile: Double, counts: [Int], bounds: [Int]) -> Double? {
        let total = counts.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = quantile * Double(total)
        var below = 0
        for index in counts.indices {
            let count = counts[index]
            if count > 0 && Double(below + count) >= rank {
                guard index < bounds.count else { return Double(bounds[bounds.count - 1]) / 1e9 }
                let lower = index == 0 ? 0 : Double(bounds[index - 1])
                let upper = Double(bounds[index])
                let within = max(0, rank - Double(below)) / Double(count)
                return (lower + (upper - lower) * within) / 1e9
            }
            below += count
        }
        return Double(bounds[bounds.count - 1]) / 1e9
    }
}

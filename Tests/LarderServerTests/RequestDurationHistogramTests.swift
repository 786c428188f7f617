import Testing

@testable import LarderServer

/// The dashboard's latency figures: quantiles read from histogram buckets as Prometheus's
/// `histogram_quantile` reads them, and the rings that keep its failures and history.
@Suite struct RequestDurationHistogramTests {
    let bounds = [1_000_000, 2_000_000, 5_000_000]

    @Test func aQuantileIsInterpolatedWithinItsBucket() {
        // 10 requests up to 1 ms, 10 in (1, 2] ms: the median is the first bucket's top.
        #expect(RequestDurationHistogram.quantile(0.5, counts: [10, 10, 0, 0], bounds: bounds) == 0.001)
        // The 15th of 20 is half way through the second bucket.
        #expect(RequestDurationHistogram.quantile(0.75, counts: [10, 10, 0, 0], bounds: bounds) == 0.0015)
        // Past the last bound: that bound, as histogram_quantile gives.
        #expect(RequestDurationHistogram.quantile(0.99, counts: [1, 0, 0, 99], bounds: bounds) == 0.005)
        #expect(RequestDurationHistogram.quantile(0.5, counts: [0, 0, 0, 0], bounds: bounds) == nil)
    }

    @Test func hitsAndMissesAreKeptApartAndAddUpToTheWhole() {
        let histogram = RequestDurationHistogram()
        histogram.record(nanoseconds: 50_000, result: .init(.memoryHit))
        histogram.record(nanoseconds: 50_000, result: .init(.diskHit))
        histogram.record(nanoseconds: 40_000_000, result: .init(.miss))
        histogram.record(nanoseconds: 40_000_000, result: .init(.error))
        #expect(histogram.counts([.hit]).reduce(0, +) == 2)
        #expect(histogram.counts([.miss]).reduce(0, +) == 1)
        #expect(histogram.counts().reduce(0, +) == 4)
        var text: [UInt8] = []
        histogram.render(into: &text)
        let rendered = String(decoding: text, as: UTF8.self)
        #expect(rendered.contains("larder_request_duration_seconds_count 4\n"))
        #expect(rendered.contains("larder_request_duration_by_result_seconds_bucket{result=\"hit\",le=\"0.0001\"} 2\n"))
        #expect(rendered.contains("larder_request_duration_by_result_seconds_count{result=\"miss\"} 1\n"))
    }

    @Test func aRingKeepsTheNewestInOrder() {
        var ring = Ring<Int>(capacity: 3)
        for value in 1...2 { ring.append(value) }
        #expect(ring.elements == [1, 2])
        for value in 3...7 { ring.append(value) }
        #expect(ring.elements == [5, 6, 7])
    }
}

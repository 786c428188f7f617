import Glibc

/// Time sources. Deadlines use the monotonic clock; HTTP dates and ages use wall time.
public enum Clocks {
    /// Monotonic nanoseconds since an arbitrary origin (CLOCK_MONOTONIC).
    @inline(__always)
    public static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Monotonic seconds, with fraction.
    @inline(__always)
    public static func monotonicSeconds() -> Double {
        Double(monotonicNanos()) / 1e9
    }

    /// Wall-clock seconds since the Unix epoch, with fraction.
    @inline(__always)
    public static func wallSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

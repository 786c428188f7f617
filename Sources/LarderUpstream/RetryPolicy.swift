import LarderConfig
import LarderHTTP

/// When and after how long a failed upstream attempt is tried again (`[retry]` or a route's
/// `[route.retry]`).
public struct RetryPolicy: Sendable, Equatable {
    public let config: RetryConfig

    public init(_ config: RetryConfig) { self.config = config }

    /// Why an attempt failed, in `retry_on` terms.
    public enum Reason: String, Sendable, CaseIterable {
        case connect, timeout, reset
        case status5xx = "5xx"
        case status500 = "500"
        case status429 = "429"
    }

    /// The reason an error is retryable under, if any. Errors after the response head
    /// (a body cut short) are never retried: a client may already have bytes.
    public static func reason(for error: UpstreamError) -> Reason? {
        guard !error.afterHead else { return nil }
        switch error.kind {
        case .connect: return .connect
        case .timeout: return .timeout
        case .reset: return .reset
        // A name that does not resolve will not resolve 200 ms later: asking again only delays
        // the 502 (a parent whose name fails is still failed over).
        case .dns, .truncated, .protocolError, .digest, .tls, .aborted, .forbidden, .other: return nil
        }
    }

    /// The reason a response status is retryable under, if any: 502/503/504 as `5xx`, 500 only
    /// as `500`, 429. Other 4xx never are.
    public static func reason(forStatus status: Int) -> Reason? {
        switch status {
        case 502, 503, 504: .status5xx
        case 500: .status500
        case 429: .status429
        default: nil
        }
    }

    /// Whether `reason` is one of the configured `retry_on` classes.
    public func retries(_ reason: Reason) -> Bool {
        guard config.strategy != .none, config.maxAttempts > 0 else { return false }
        switch reason {
        case .connect: return config.retryOn.contains(.connect)
        case .timeout: return config.retryOn.contains(.timeout)
        case .reset: return config.retryOn.contains(.reset)
        case .status5xx: return config.retryOn.contains(.status5xx)
        case .status500: return config.retryOn.contains(.status500)
        case .status429: return config.retryOn.contains(.status429)
        }
    }

    /// Only idempotent requests are retried (RFC 9110 §9.2.2); POST and other methods only on
    /// a route that declares its requests idempotent.
    public static func mayRetry(method: HTTPMethod, routeDeclaresIdempotent: Bool) -> Bool {
        method.isIdempotent || routeDeclaresIdempotent
    }

    /// The delay before retry number `retry` (0 for the first retry): exponential
    /// `min(base × multiplier^retry, max)` or linear `base`, plus a jitter in `[0, jitter]`
    /// drawn from `random` (which returns values in [0, 1)).
    public func delay(forRetry retry: Int, random: () -> Double) -> Duration {
        let base = config.baseDelay.totalSeconds
        let cap = config.maxDelay.totalSeconds
        let planned: Double
        switch config.strategy {
        case .exponential: planned = min(base * pow(config.multiplier, Double(retry)), cap)
        case .linear: planned = min(base, cap)
        case .none: planned = 0
        }
        let jitter = config.jitter.totalSeconds * min(max(random(), 0), 1)
        return .nanoseconds(Int64(((planned + jitter) * 1e9).rounded()))
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3): delay-seconds or an HTTP date, as a delay
    /// from `now` (never negative). nil when it cannot be parsed.
    public static func retryAfter(_ value: String, now: Double) -> Duration? {
        let text = ASCII.trimOWS(value[...])
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), text.count <= 10, let seconds = Int(text) {
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(String(text)) else { return nil }
        return .nanoseconds(Int64(max(0, Double(date) - now) * 1e9))
    }

    /// Whether a Retry-After is short enough to wait for (within `max_delay`).
    public func honours(retryAfter delay: Duration) -> Bool {
        delay <= config.maxDelay
    }
}

private func pow(_ base: Double, _ exponent: Double) -> Double {
    var result = 1.0
    var remaining = Int(exponent)
    while remaining > 0 {
        result *= base
        remaining -= 1
    }
    return result
}

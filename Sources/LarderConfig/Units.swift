/// Durations and sizes written as strings with units.
public enum Units {
    /// `"100us"`, `"250ms"`, `"5s"`, `"10m"`, `"2h"`, `"7d"`; a decimal number is allowed (`"1.5s"`),
    /// and `"0"` needs no unit.
    public static func duration(_ text: String) -> Duration? {
        // Zero is zero in any unit ("busy_poll = \"0\"").
        if text == "0" { return .zero }
        let (number, unit) = split(text)
        guard let value = number, value >= 0 else { return nil }
        let seconds: Double
        switch unit {
        case "us", "µs": seconds = value / 1_000_000
        case "ms": seconds = value / 1000
        case "s": seconds = value
        case "m": seconds = value * 60
        case "h": seconds = value * 3600
        case "d": seconds = value * 86_400
        default: return nil
        }
        guard seconds < 1e10 else { return nil }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// `"512KiB"`, `"256MiB"`, `"10GiB"`, `"1TiB"`, also `"B"`, `"KB"`, `"MB"`, `"GB"`, `"TB"`
    /// (powers of 1000).
    public static func size(_ text: String) -> Int64? {
        let (number, unit) = split(text)
        guard let value = number, value >= 0 else { return nil }
        let multiplier: Double
        switch unit {
        case "B": multiplier = 1
        case "KiB": multiplier = 1024
        case "MiB": multiplier = 1024 * 1024
        case "GiB": multiplier = 1024 * 1024 * 1024
        case "TiB": multiplier = 1024 * 1024 * 1024 * 1024
        case "KB", "kB": multiplier = 1000
        case "MB": multiplier = 1_000_000
        case "GB": multiplier = 1_000_000_000
        case "TB": multiplier = 1_000_000_000_000
        default: return nil
        }
        let bytes = value * multiplier
        guard bytes < 9e18 else { return nil }
        return Int64(bytes.rounded())
    }

    /// Formats a duration the way a config file writes it.
    public static func format(_ duration: Duration) -> String {
        let nanos = duration.totalNanoseconds
        if nanos % 1_000_000 != 0 { return "\(nanos / 1000)us" }
        let millis = duration.totalMilliseconds
        if millis % 86_400_000 == 0 && millis > 0 { return "\(millis / 86_400_000)d" }
        if millis % 3_600_000 == 0 && millis > 0 { return "\(millis / 3_600_000)h" }
        if millis % 60_000 == 0 && millis > 0 { return "\(millis / 60_000)m" }
        if millis % 1000 == 0 { return "\(millis / 1000)s" }
        return "\(millis)ms"
    }

    /// Formats a size the way a config file writes it.
    public static func format(bytes: Int64) -> String {
        for (unit, factor) in [("TiB", Int64(1) << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        return "\(bytes)B"
    }

    private static func split(_ text: String) -> (Double?, String) {
        let digits = text.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let unit = String(text.dropFirst(digits.count))
        guard !digits.isEmpty, digits.first != ".", digits.last != "." else { return (nil, unit) }
        return (Double(digits), unit)
    }
}

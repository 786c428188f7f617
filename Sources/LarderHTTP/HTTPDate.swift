import Glibc

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate out; IMF-fixdate, RFC 850 and asctime in.
public enum HTTPDate {
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// Formats seconds since the epoch as `Sun, 06 Nov 1994 08:49:37 GMT`.
    public static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(dayNames[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(monthNames[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// Parses any of the three formats, exactly as RFC 9110 §5.6.7 spells them (single spaces,
    /// asctime's space-padded day aside); nil when the text is not a valid date. Extra spaces,
    /// a missing "GMT" or a lower-case month make an invalid date, which for `Expires` means
    /// already expired (RFC 9111 §5.3).
    public static func parse(_ text: String) -> Int? {
        // Nearly every date on the wire is an IMF-fixdate (RFC 9110 §5.6.7 makes it the one to
        // send); read it straight from its bytes. Anything else takes the general path.
        if let seconds = parseFixdate(text) { return seconds }
        let words = text.split(separator: " ", omittingEmptySubsequences: false)
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        if words.count == 4, words[0].hasSuffix(","), longDayNames.contains(String(words[0].dropLast())), words[3] == "GMT" {
            let dateParts = words[1].split(separator: "-", omittingEmptySubsequences: false)
            guard dateParts.count == 3, dateParts[0].count == 2 else { return nil }
            return build(day: dateParts[0], month: dateParts[1], year: dateParts[2], time: words[2], twoDigitYear: true)
        }
        // asctime: Sun Nov  6 08:49:37 1994 (a one-digit day is padded with a space), or Sun Nov 16 ...
        if words.count == 5 || words.count == 6, dayNames.contains(String(words[0])) {
            let day: Substring
            if words.count == 6 {
                guard words[2].isEmpty, words[3].count == 1 else { return nil }
                day = words[3]
            } else {
                guard words[2].count == 2 else { return nil }
                day = words[2]
            }
            return build(day: day, month: words[1], year: words[words.count - 1], time: words[words.count - 2], twoDigitYear: false)
        }
        return nil
    }

    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

    private static func build(day: Substring, month: Substring, year: Substring, time: Substring, twoDigitYear: Bool) -> Int? {
        guard let dayValue = number(day), (1...31).contains(dayValue),
            let monthIndex = monthNames.firstIndex(where: { $0 == month }),
            var yearValue = number(year)
        else { return nil }
        if twoDigitYear {
            guard year.count == 2 else { return nil }
            // RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
            yearValue += yearValue < 70 ? 2000 : 1900
        } else if year.count != 4 {
            return nil
        }
        let clock = time.split(separator: ":")
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(yearValue - 1900)
        parts.tm_mon = Int32(monthIndex)
        parts.tm_mday = Int32(dayValue)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int(timegm(&parts))
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`, exactly 29 bytes; nil for any other shape.
    static func parseFixdate(_ text: String) -> Int? {
        ASCII.withUTF8(of: text) { parseFixdate($0) }
    }

    /// Parses a date from a field value's bytes, as ``parse(_:)-(String)`` does its text: an
    /// IMF-fixdate without making a string.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> Int? {
        parseFixdate(bytes.assumingMemoryBound(to: UInt8.self)) ?? parse(ASCII.string(bytes))
    }

    static func parseFixdate(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count == 29, bytes[3] == 0x2C, bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
            bytes[16] == 0x20, bytes[19] == 0x3A, bytes[22] == 0x3A, bytes[25] == 0x20,
            bytes[26] == 0x47, bytes[27] == 0x4D, bytes[28] == 0x54
        else { return nil }
        // Inlined: five calls per date, and a stored response's Date and Last-Modified are read
        // on every miss.
        @inline(__always) func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for index in start..<(start + count) {
                let byte = bytes[index]
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        let monthKey = (UInt32(bytes[8]) << 16) | (UInt32(bytes[9]) << 8) | UInt32(bytes[10])
        guard let day = digits(5, 2), let year = digits(12, 4), let hour = digits(17, 2), let minute = digits(20, 2),
            let second = digits(23, 2), let month = fixdateMonths.firstIndex(of: monthKey),
            (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        return daysFromCivil(year: year, month: month + 1, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// "Jan".."Dec" as three bytes in a word each.
    private static let fixdateMonths: [UInt32] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .map { name in name.utf8.reduce(0) { ($0 << 8) | UInt32($1) } }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil), the
    /// same arithmetic timegm does, without its locale and locking.
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 4, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(text)
    }
}

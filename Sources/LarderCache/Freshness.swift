import LarderHTTP

/// Freshness and age calculations of RFC 9111 §4.2 for a shared cache.
public enum Freshness {
    /// Heuristic freshness is this fraction of the time since Last-Modified (§4.2.2)...
    public static let heuristicFraction = 0.1
    /// ...capped at one day, as most caches do.
    public static let heuristicCap = 86_400.0

    /// Status codes cacheable by default, i.e. heuristically (RFC 9110 §15.1).
    public static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The freshness lifetime of a response in seconds (§4.2.1): s-maxage, then max-age, then
    /// Expires minus Date, then a heuristic from Last-Modified when the status allows it.
    /// An invalid Expires means already expired.
    public static func lifetime(
        status: Int, headers: HTTPHeaders, cacheControl: CacheControl, responseTime: Double
    ) -> Double {
        if let sMaxAge = cacheControl.sMaxAge { return Double(sMaxAge) }
        if let maxAge = cacheControl.maxAge { return Double(maxAge) }
        if headers.contains(.expires) {
            let expiresValues = headers.values("Expires")
            // §5.3: a cache recipient MUST interpret invalid date formats, especially "0",
            // as a time in the past; several Expires lines are treated the same way.
            guard expiresValues.count == 1, let expires = HTTPDate.parse(expiresValues[0]) else { return 0 }
            let date = dateValue(headers) ?? responseTime
            return max(0, Double(expires) - date)
        }
        // §4.2.2: heuristics only when nothing explicit is given, and not past "public" alone for
        // statuses that are not heuristically cacheable.
        guard heuristicallyCacheable.contains(status) || cacheControl.isPublic,
            let lastModified = headers.date(.lastModified)
        else { return 0 }
        let date = dateValue(headers) ?? responseTime
        let age = date - Double(lastModified)
        guard age > 0 else { return 0 }
        return min(age * heuristicFraction, heuristicCap)
    }

    /// The Date header as seconds, when valid.
    public static func dateValue(_ headers: HTTPHeaders) -> Double? {
        headers.date(.date).map(Double.init)
    }

    /// The `Age` value (RFC 9111 §5.1): the first member of the first field line when there
    /// are several ("7200, 0" is 7200), nil when that is not delta-seconds (§1.2.2: digits only;
    /// too large a value is 2^31).
    public static func age(_ headers: HTTPHeaders) -> Int? {
        guard headers.contains(.age), let first = headers.values("Age").first else { return nil }
        let member = ASCII.trimOWS(first.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        guard !member.isEmpty, member.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return member.utf8.count > 10 ? 1 << 31 : min(Int(member) ?? (1 << 31), 1 << 31)
    }

    /// `corrected_initial_age` (§4.2.3): the age of the response when it was received.
    public static func correctedInitialAge(headers: HTTPHeaders, requestTime: Double, responseTime: Double) -> Double {
        initialAges(headers: headers, requestTime: requestTime, responseTime: responseTime).corrected
    }

    /// `corrected_initial_age` (§4.2.3), and the age the response states itself (its Age, or
    /// its Date's distance in whole seconds, the larger): the second without the time the
    /// request waited for it, nor the part of a second Date cannot express.
    public static func initialAges(
        headers: HTTPHeaders, requestTime: Double, responseTime: Double
    ) -> (corrected: Double, stated: Double) {
        let date = dateValue(headers)
        let apparentAge = max(0, responseTime - (date ?? responseTime))
        let ageValue = Double(age(headers) ?? 0)
        let responseDelay = max(0, responseTime - requestTime)
        let correctedAgeValue = ageValue + responseDelay
        let statedApparent = max(0, responseTime.rounded(.down) - (date ?? responseTime))
        return (max(apparentAge, correctedAgeValue), max(statedApparent, ageValue))
    }
}

import Glibc
import LarderHTTP
import LarderIO

/// The access line in each `log.access_format`.
extension AccessLog {
    /// What one line says, whatever the format.
    struct Entry {
        let client: SocketAddress?
        let method: String
        let url: String
        let status: Int
        let outcome: String
        let bytes: Int
        let durationNanos: UInt64
        let attempts: Int
        let retries: String?
        let tls: String?
        let key: String?
        let user: String?
        let agent: String?

        var durationMillis: Int { Int(durationNanos / 1_000_000) }

        /// Squid's result code for the outcome (its `%Ss`): what calamaris and SARG count as
        /// hits and misses.
        var squidCode: String {
            switch outcome {
            case "hit": "TCP_MEM_HIT"
            case "disk_hit": "TCP_HIT"
            case "revalidated": "TCP_REFRESH_UNMODIFIED"
            case "stale": "TCP_REFRESH_FAIL_OLD"
            case "tunnel", "intercept": "TCP_TUNNEL"
            case "admin": "NONE"
            case "error" where status >= 400 && status < 500: "NONE"
            default: "TCP_MISS"
            }
        }

        /// Where it was answered from (Squid's `%Sh/%<a`): the origin's host for what went
        /// upstream, none for hits.
        var squidHierarchy: String {
            switch outcome {
            case "hit", "disk_hit", "stale", "admin": return "HIER_NONE/-"
            default:
                guard status < 400 || outcome != "error", let host = host else { return "HIER_NONE/-" }
                return "HIER_DIRECT/" + host
            }
        }

        /// The host of an absolute URL or a CONNECT authority.
        var host: String? {
            var rest = Substring(url)
            if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") { rest = rest[rest.index(colon, offsetBy: 3)...] }
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            guard !authority.isEmpty, authority != "-" else { return nil }
            if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
                return String(authority[authority.index(after: authority.startIndex)..<close])
            }
            return String(authority.prefix { $0 != ":" })
        }
    }

    /// `TIME CLIENT "METHOD URL" STATUS OUTCOME BYTES DURATION attempts=N [...]`.
    func appendLarder(_ entry: Entry) {
        appendTimestamp()
        buffer.append(32)
        appendClient(entry)
        buffer.append(contentsOf: " \"".utf8)
        buffer.append(contentsOf: entry.method.utf8)
        buffer.append(32)
        appendSanitized(entry.url)
        buffer.append(contentsOf: "\" ".utf8)
        appendDecimal(entry.status)
        buffer.append(32)
        buffer.append(contentsOf: entry.outcome.utf8)
        buffer.append(32)
        appendDecimal(entry.bytes)
        buffer.append(32)
        let micros = Int(entry.durationNanos / 1000)
        appendDecimal(micros / 1000)
        buffer.append(46)
        let fraction = micros % 1000
        if fraction < 100 { buffer.append(48) }
        if fraction < 10 { buffer.append(48) }
        appendDecimal(fraction)
        buffer.append(contentsOf: "ms attempts=".utf8)
        appendDecimal(entry.attempts)
        if let retries = entry.retries {
            buffer.append(contentsOf: " retries=".utf8)
            buffer.append(contentsOf: retries.utf8)
        }
        // A request that came inside an intercepted TLS session: its protocol version.
        if let tls = entry.tls {
            buffer.append(contentsOf: " tls=".utf8)
            buffer.append(contentsOf: tls.utf8)
        }
        // The key a route built otherwise than from the URL (quoted: it is the operator's text).
        if let key = entry.key { appendQuoted(" key=", key) }
        // The proxy user (proxy.auth_users) and the client's User-Agent, quoted: client text.
        if let user = entry.user { appendQuoted(" user=", user) }
        if let agent = entry.agent { appendQuoted(" ua=", agent) }
    }

    /// Squid's native format (`logformat squid`):
    /// `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`; the user is URL-encoded
    /// as Squid does, the content type is not known here (`-`).
    func appendSquid(_ entry: Entry) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        appendDecimal(Int(now.tv_sec))
        buffer.append(46)
        let millis = Int(now.tv_nsec / 1_000_000)
        buffer.append(UInt8(48 + millis / 100))
        buffer.append(UInt8(48 + (millis / 10) % 10))
        buffer.append(UInt8(48 + millis % 10))
        let elapsed = String(entry.durationMillis)
        buffer.append(contentsOf: repeatElement(32, count: max(1, 7 - elapsed.utf8.count)))
        buffer.append(contentsOf: elapsed.utf8)
        buffer.append(32)
        appendClient(entry)
        buffer.append(32)
        buffer.append(contentsOf: entry.squidCode.utf8)
        buffer.append(47)
        if entry.status < 100 { buffer.append(48) }
        if entry.status < 10 { buffer.append(48) }
        appendDecimal(entry.status)
        buffer.append(32)
        appendDecimal(entry.bytes)
        buffer.append(32)
        buffer.append(contentsOf: entry.method.utf8)
        buffer.append(32)
        appendSanitized(entry.url, space: UInt8(ascii: "+"))
        buffer.append(32)
        if let user = entry.user, !user.isEmpty { appendPercentEncoded(user) } else { buffer.append(45) }
        buffer.append(32)
        buffer.append(contentsOf: entry.squidHierarchy.utf8)
        buffer.append(contentsOf: " -".utf8)
    }

    /// NCSA combined (`logformat combined`): `CLIENT - USER [DATE] "METHOD URL HTTP/1.1" STATUS
    /// BYTES "-" "AGENT"` (no referrer is kept).
    func appendCombined(_ entry: Entry) {
        appendClient(entry)
        buffer.append(contentsOf: " - ".utf8)
        if let user = entry.user, !user.isEmpty { appendPercentEncoded(user) } else { buffer.append(45) }
        buffer.append(contentsOf: " [".utf8)
        var now = time_t(Int(Clocks.wallSeconds()))
        var parts = tm()
        gmtime_r(&now, &parts)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let date =
            "\(two(parts.tm_mday))/\(months[Int(parts.tm_mon)])/\(parts.tm_year + 1900):\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
        buffer.append(contentsOf: date.utf8)
        buffer.append(contentsOf: "] \"".utf8)
        buffer.append(contentsOf: entry.method.utf8)
        buffer.append(32)
        appendSanitized(entry.url)
        buffer.append(contentsOf: " HTTP/1.1\" ".utf8)
        appendDecimal(entry.status)
        buffer.append(32)
        appendDecimal(entry.bytes)
        buffer.append(contentsOf: " \"-\" ".utf8)
        appendQuoted("", entry.agent ?? "-")
    }

    /// One JSON object per line, the larder format's fields by name.
    func appendJSON(_ entry: Entry) {
        buffer.append(contentsOf: "{\"time\":\"".utf8)
        appendTimestamp()
        buffer.append(contentsOf: "\",\"client\":".utf8)
        appendJSONString(entry.client?.ipString ?? "-")
        buffer.append(contentsOf: ",\"method\":".utf8)
        appendJSONString(entry.method)
        buffer.append(contentsOf: ",\"url\":".utf8)
        appendJSONString(entry.url)
        buffer.append(contentsOf: ",\"status\":".utf8)
        appendDecimal(entry.status)
        buffer.append(contentsOf: ",\"outcome\":".utf8)
        appendJSONString(entry.outcome)
        buffer.append(contentsOf: ",\"bytes\":".utf8)
        appendDecimal(entry.bytes)
        buffer.append(contentsOf: ",\"duration_ms\":".utf8)
        buffer.append(contentsOf: String(Double(entry.durationNanos / 1000) / 1000).utf8)
        buffer.append(contentsOf: ",\"attempts\":".utf8)
        appendDecimal(entry.attempts)
        for (name, value) in [
            ("retries", entry.retries), ("tls", entry.tls), ("key", entry.key), ("user", entry.user), ("user_agent", entry.agent),
        ] {
            guard let value else { continue }
            buffer.append(contentsOf: ",\"\(name)\":".utf8)
            appendJSONString(value)
        }
        buffer.append(UInt8(ascii: "}"))
    }

    private func appendClient(_ entry: Entry) {
        if let client = entry.client { buffer.append(contentsOf: client.ipString.utf8) } else { buffer.append(45) }
    }

    /// Client text outside quotes: quotes become `'`, spaces (where a field may not hold one)
    /// `space`, control bytes `'`.
    private func appendSanitized(_ text: String, space: UInt8 = 32) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), 0..<0x20, 0x7F: buffer.append(UInt8(ascii: "'"))
            case 32: buffer.append(space)
            default: buffer.append(byte)
            }
        }
    }

    /// Squid's user field: URL-encoded, so a space or quote cannot split the line.
    private func appendPercentEncoded(_ text: String) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "@")
            {
                buffer.append(byte)
            } else {
                buffer.append(UInt8(ascii: "%"))
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 15)])
            }
        }
    }

    /// A JSON string (RFC 8259 §7): quote, backslash and control characters escaped.
    private func appendJSONString(_ text: String) {
        let hex = Array("0123456789abcdef".utf8)
        buffer.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                buffer.append(UInt8(ascii: "\\"))
                buffer.append(byte)
            case 0..<0x20:
                buffer.append(contentsOf: "\\u00".utf8)
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 15)])
            default:
                buffer.append(byte)
            }
        }
        buffer.append(UInt8(ascii: "\""))
    }
}

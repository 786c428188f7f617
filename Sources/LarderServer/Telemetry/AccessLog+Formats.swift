import Glibc
import LarderHTTP
import LarderIO

/// The access line in each `log.access_format`.
extension AccessLog {
    /// The request's target as a line names it: text, or an absolute URL that the default
    /// format writes from its parts without building its string.
    enum Target {
        case text(String)
        case absolute(AbsoluteURL)

        var text: String {
            switch self {
            case .text(let text): text
            case .absolute(let url): url.description
            }
        }
    }

    /// What became of a request, as its line's outcome word says it.
    enum Outcome: Equatable {
        case request(RequestOutcome)
        /// The head went out and the body broke off.
        case truncated
        /// A CONNECT tunnel, closed by either side or for a reason of Larder's.
        case tunnel(Tunnel.CloseReason?)

        /// The word written: `hit`, `miss`, `truncated`, `tunnel`, `tunnel-idle`, ...
        var text: String {
            switch self {
            case .request(let outcome): outcome.rawValue
            case .truncated: "truncated"
            case .tunnel(nil): "tunnel"
            case .tunnel(let reason?): "tunnel-" + reason.rawValue
            }
        }
    }

    /// What one line says, whatever the format.
    struct Entry {
        let client: SocketAddress?
        let method: String
        let target: Target
        let status: Int
        let outcome: Outcome
        let bytes: Int
        let durationNanos: UInt64
        let attempts: Int
        let retries: String?
        let tls: String?
        let key: String?
        let user: String?
        let agent: String?
        /// Why it failed; nil for a success or an answer the origin gave.
        var detail: FailureCause? = nil

        var durationMillis: Int { Int(durationNanos / 1_000_000) }

        /// The target's text.
        var url: String { target.text }

        /// Squid's result code for the outcome (its `%Ss`): what calamaris and SARG count as
        /// hits and misses.
        /// Squid's tags for a failure: `TCP_DENIED` for what the proxy refused, the
        /// `_TIMEDOUT` and `_ABORTED` suffixes for a timeout and a client gone.
        var squidCode: String {
            // A stale answer's detail is the origin's failure, not its own.
            if outcome == .request(.stale) { return squidOutcomeCode }
            switch detail {
            case .refused?, .auth?, .loop?: return "TCP_DENIED"
            case .timeout?, .clientTimeout?: return squidOutcomeCode + "_TIMEDOUT"
            case .clientGone?: return squidOutcomeCode + "_ABORTED"
            default: return squidOutcomeCode
            }
        }

        private var squidOutcomeCode: String {
            switch outcome {
            case .request(.memoryHit): "TCP_MEM_HIT"
            case .request(.diskHit): "TCP_HIT"
            case .request(.revalidated): "TCP_REFRESH_UNMODIFIED"
            case .request(.stale): "TCP_REFRESH_FAIL_OLD"
            case .tunnel(nil), .request(.tunnel), .request(.intercept): "TCP_TUNNEL"
            case .request(.admin): "NONE"
            case .request(.error) where status >= 400 && status < 500: "NONE"
            default: "TCP_MISS"
            }
        }

        /// Where it was answered from (Squid's `%Sh/%<a`): the origin's host for what went
        /// upstream, none for hits.
        var squidHierarchy: String {
            switch outcome {
            case .request(.memoryHit), .request(.diskHit), .request(.stale), .request(.admin): return "HIER_NONE/-"
            default:
                guard status < 400 || outcome != .request(.error), let host = host else { return "HIER_NONE/-" }
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

    /// `TIME CLIENT "METHOD URL" STATUS OUTCOME BYTES DURATION attempts=N [...]`, written in
    /// place (``AccessLog/appendLine(bound:_:)``): the default format, one line per request.
    func appendLarder(_ entry: Entry) {
        let client = clientText(entry.client)
        // Every field at its longest: texts are copied byte for byte (sanitizing replaces, never
        // adds), numbers take at most 20 digits, the fixed text well under 128 bytes.
        var bound = 128 + 5 * 20 + AccessLog.timestampBound + client.count + entry.method.utf8.count
        switch entry.target {
        case .text(let text): bound += text.utf8.count
        case .absolute(let url): bound += url.textBound
        }
        let outcome = entry.outcome.text
        bound += outcome.utf8.count
        bound += (entry.retries?.utf8.count ?? 0) + (entry.tls?.utf8.count ?? 0) + (entry.detail?.rawValue.utf8.count ?? 0)
        for text in [entry.key, entry.user, entry.agent] { bound += text.map(AccessLog.escapedBound) ?? 0 }
        appendLine(bound: bound) { writer in
            writeTimestamp(to: &writer)
            writer.append(32)
            client.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
            writer.append(" \"" as StaticString)
            writer.append(entry.method)
            writer.append(32)
            let target = writer.count
            switch entry.target {
            case .text(let text): writer.append(text)
            case .absolute(let url): url.write(to: &writer)
            }
            AccessLog.sanitize(UnsafeMutableBufferPointer(rebasing: writer.buffer[target..<writer.count]), space: 32)
            writer.append("\" " as StaticString)
            writer.append(decimal: entry.status)
            writer.append(32)
            writer.append(outcome)
            writer.append(32)
            writer.append(decimal: entry.bytes)
            writer.append(32)
            let micros = Int(entry.durationNanos / 1000)
            writer.append(decimal: micros / 1000)
            writer.append(46)
            writer.append(micros % 1000, zeroPaddedTo: 3)
            writer.append("ms attempts=" as StaticString)
            writer.append(decimal: entry.attempts)
            if let retries = entry.retries {
                writer.append(" retries=" as StaticString)
                writer.append(retries)
            }
            // A request that came inside an intercepted TLS session: its protocol version.
            if let tls = entry.tls {
                writer.append(" tls=" as StaticString)
                writer.append(tls)
            }
            // The key a route built otherwise than from the URL (quoted: it is the operator's text).
            if let key = entry.key { AccessLog.writeQuoted(" key=", key, to: &writer) }
            // The proxy user (proxy.auth_users) and the client's User-Agent, quoted: client text.
            if let user = entry.user { AccessLog.writeQuoted(" user=", user, to: &writer) }
            if let agent = entry.agent { AccessLog.writeQuoted(" ua=", agent, wire: true, to: &writer) }
            // Last, so that the fields before keep their places: why it failed.
            if let detail = entry.detail {
                writer.append(" detail=" as StaticString)
                writer.append(detail.rawValue)
            }
        }
    }

    /// Squid's native format (`logformat squid`):
    /// `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`; the user is URL-encoded
    /// as Squid does, the content type is not known here (`-`). A failed request's last field
    /// is instead Squid's `%err_code/%err_detail` (`ERR_DNS_FAIL/dns`): the line keeps its ten
    /// fields, which calamaris requires.
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
        buffer.append(32)
        if let detail = entry.detail {
            buffer.append(contentsOf: detail.squidErrorCode.utf8)
            buffer.append(UInt8(ascii: "/"))
            buffer.append(contentsOf: detail.rawValue.utf8)
        } else {
            buffer.append(45)
        }
    }

    /// NCSA combined (`logformat combined`): `CLIENT - USER [DATE] "METHOD URL HTTP/1.1" STATUS
    /// BYTES "-" "AGENT"` (no referrer is kept), and on a failed request a trailing `"DETAIL"`,
    /// which combined readers skip as they skip nginx's and Apache's own extra fields.
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
        appendQuoted("", entry.agent ?? "-", wire: true)
        if let detail = entry.detail {
            buffer.append(contentsOf: " \"".utf8)
            buffer.append(contentsOf: detail.rawValue.utf8)
            buffer.append(UInt8(ascii: "\""))
        }
    }

    /// One JSON object per line, the larder format's fields by name.
    func appendJSON(_ entry: Entry) {
        buffer.append(contentsOf: "{\"time\":\"".utf8)
        appendTimestamp()
        buffer.append(contentsOf: "\",\"client\":".utf8)
        // An address's text needs no escaping.
        buffer.append(UInt8(ascii: "\""))
        appendClient(entry)
        buffer.append(UInt8(ascii: "\""))
        buffer.append(contentsOf: ",\"method\":".utf8)
        appendJSONString(entry.method)
        buffer.append(contentsOf: ",\"url\":".utf8)
        appendJSONString(entry.url)
        buffer.append(contentsOf: ",\"status\":".utf8)
        appendDecimal(entry.status)
        buffer.append(contentsOf: ",\"outcome\":".utf8)
        appendJSONString(entry.outcome.text)
        buffer.append(contentsOf: ",\"bytes\":".utf8)
        appendDecimal(entry.bytes)
        buffer.append(contentsOf: ",\"duration_ms\":".utf8)
        buffer.append(contentsOf: String(Double(entry.durationNanos / 1000) / 1000).utf8)
        buffer.append(contentsOf: ",\"attempts\":".utf8)
        appendDecimal(entry.attempts)
        for (name, value) in [
            ("retries", entry.retries), ("tls", entry.tls), ("key", entry.key), ("user", entry.user), ("user_agent", entry.agent),
            ("detail", entry.detail?.rawValue),
        ] {
            guard let value else { continue }
            buffer.append(contentsOf: ",\"\(name)\":".utf8)
            appendJSONString(value, wire: name == "user_agent")
        }
        buffer.append(UInt8(ascii: "}"))
    }

    private func appendClient(_ entry: Entry) {
        buffer.append(contentsOf: clientText(entry.client))
    }

    /// Client text outside quotes: quotes become `'`, spaces (where a field may not hold one)
    /// `space`, control bytes `'`.
    private func appendSanitized(_ text: String, space: UInt8 = 32) {
        appendLine(bound: text.utf8.count) { writer in
            let start = writer.count
            writer.append(text)
            AccessLog.sanitize(UnsafeMutableBufferPointer(rebasing: writer.buffer[start..<writer.count]), space: space)
        }
    }

    /// ``appendSanitized(_:space:)`` over bytes already written, in place: a C1 control's two
    /// bytes of UTF-8 (C2 80-9F) become two `'`.
    static func sanitize(_ bytes: UnsafeMutableBufferPointer<UInt8>, space: UInt8) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0xC2, index + 1 < bytes.count, bytes[index + 1] >= 0x80, bytes[index + 1] <= 0x9F {
                bytes[index] = UInt8(ascii: "'")
                bytes[index + 1] = UInt8(ascii: "'")
                index += 2
                continue
            }
            bytes[index] = byte == 32 ? space : byte < 0x20 || byte == UInt8(ascii: "\"") || byte == 0x7F ? UInt8(ascii: "'") : byte
            index += 1
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

    /// A JSON string (RFC 8259 §7): quote, backslash and control characters escaped
    /// (``appendJSONEscaped(_:wire:to:)``).
    private func appendJSONString(_ text: String, wire: Bool = false) {
        buffer.append(UInt8(ascii: "\""))
        AccessLog.appendJSONEscaped(text, wire: wire, to: &buffer)
        buffer.append(UInt8(ascii: "\""))
    }
}

import LarderHTTP

/// The `Cache-Status` member Larder adds to a response (RFC 9211), built up as a request is
/// answered and rendered once.
struct CacheStatus {
    /// Served from cache.
    var hit = false
    /// Why it went forward (RFC 9211 §2.2), rendered only when the field is written.
    var fwd: ForwardReason?
    /// The status the origin answered the forwarded request with, when it is not the one
    /// sent to the client (a 304 to a validation, a 5xx replaced by a stale copy).
    var fwdStatus: Int?
    /// The response was stored.
    var stored = false
    /// The request was collapsed into another request's fill.
    var collapsed = false
    /// Remaining freshness in seconds (negative when stale).
    var ttl: Int?
    /// Extra detail: disk, stale, stale-while-revalidate, stale-if-error, offline,
    /// admission-deferred (`cache.admission` kept a storable response out), or an error.
    var detail: String?
    /// The cache key, when a route builds it otherwise than from the URL (RFC 9211 §2.7).
    var key: String?

    static func forwarded(_ reason: ForwardReason) -> CacheStatus {
        var status = CacheStatus()
        status.fwd = reason
        return status
    }

    var rendered: String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The most bytes ``append(to:)-(ByteWriter)`` writes, for a buffer sized once: the fixed
    /// parts (108 bytes with the longest integers and quotes) and the two strings.
    var renderedCapacity: Int { 120 + (fwd?.rawValue.utf8.count ?? 0) + (detail?.utf8.count ?? 0) + (key?.utf8.count ?? 0) }

    /// Writes the member, `larder; hit; ttl=3600` and so on, into a buffer of at least
    /// ``renderedCapacity`` bytes: every response carries one.
    func append(to writer: inout ByteWriter) {
        writer.append("larder" as StaticString)
        if hit { writer.append("; hit" as StaticString) }
        if let fwd {
            writer.append("; fwd=" as StaticString)
            writer.append(fwd.rawValue)
        }
        if let fwdStatus {
            writer.append("; fwd-status=" as StaticString)
            CacheStatus.appendInteger(fwdStatus, to: &writer)
        }
        if let ttl {
            writer.append("; ttl=" as StaticString)
            CacheStatus.appendInteger(ttl, to: &writer)
        }
        if stored { writer.append("; stored" as StaticString) }
        if collapsed { writer.append("; collapsed" as StaticString) }
        if let key {
            writer.append("; key=\"" as StaticString)
            writer.append(key.replacingQuotes())
            writer.append(UInt8(ascii: "\""))
        }
        if let detail {
            let token = detail.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
            writer.append("; detail=" as StaticString)
            // replacingQuotes swaps ASCII for ASCII: the length stays the detail's.
            writer.append(token ? detail : "\"\(detail.replacingQuotes())\"")
        }
    }

    /// Appends the member to `bytes`.
    func append(to bytes: inout [UInt8]) {
        bytes.append(
            contentsOf: [UInt8](unsafeUninitializedCapacity: renderedCapacity) { buffer, count in
                var writer = ByteWriter(buffer)
                append(to: &writer)
                count = writer.count
            })
    }

    /// Appends the `Cache-Status` field line.
    func appendField(to bytes: inout [UInt8]) {
        HeadSerializer.append("Cache-Status: ", to: &bytes)
        append(to: &bytes)
        bytes.append(contentsOf: HeadSerializer.crlf)
    }

    /// Writes the `Cache-Status` field line in place.
    func appendField(to writer: inout ByteWriter) {
        writer.append("Cache-Status: " as StaticString)
        append(to: &writer)
        writer.append("\r\n" as StaticString)
    }

    private static func appendInteger(_ value: Int, to writer: inout ByteWriter) {
        if value < 0 { writer.append(UInt8(ascii: "-")) }
        writer.append(decimal: Int(clamping: value.magnitude))
    }
}

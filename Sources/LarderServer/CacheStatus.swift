import LarderHTTP

/// The `Cache-Status` member Larder adds to a response (RFC 9211), built up as a request is
/// answered and rendered once.
struct CacheStatus {
    /// Served from cache.
    var hit = false
    /// Why it went forward: uri-miss, stale, vary-miss, request, method, bypass.
    var fwd: String?
    /// The status the origin answered the forwarded request with, when it is not the one
    /// sent to the client (a 304 to a validation, a 5xx replaced by a stale copy).
    var fwdStatus: Int?
    /// The response was stored.
    var stored = false
    /// The request was collapsed into another request's fill.
    var collapsed = false
    /// Remaining freshness in seconds (negative when stale).
    var ttl: Int?
    /// Extra detail: disk, stale, stale-while-revalidate, stale-if-error, offline, or an error.
    var detail: String?

    static func forwarded(_ reason: String) -> CacheStatus {
        var status = CacheStatus()
        status.fwd = reason
        return status
    }

    var rendered: String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the member, `larder; hit; ttl=3600` and so on, without building strings: every
    /// response carries one.
    func append(to bytes: inout [UInt8]) {
        HeadSerializer.append("larder", to: &bytes)
        if hit { HeadSerializer.append("; hit", to: &bytes) }
        if let fwd {
            HeadSerializer.append("; fwd=", to: &bytes)
            bytes.append(contentsOf: fwd.utf8)
        }
        if let fwdStatus {
            HeadSerializer.append("; fwd-status=", to: &bytes)
            CacheStatus.appendInteger(fwdStatus, to: &bytes)
        }
        if let ttl {
            HeadSerializer.append("; ttl=", to: &bytes)
            CacheStatus.appendInteger(ttl, to: &bytes)
        }
        if stored { HeadSerializer.append("; stored", to: &bytes) }
        if collapsed { HeadSerializer.append("; collapsed", to: &bytes) }
        if let detail {
            let token = detail.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
            bytes.append(contentsOf: (token ? "; detail=\(detail)" : "; detail=\"\(detail.replacingQuotes())\"").utf8)
        }
    }

    /// Appends the `Cache-Status` field line.
    func appendField(to bytes: inout [UInt8]) {
        HeadSerializer.append("Cache-Status: ", to: &bytes)
        append(to: &bytes)
        bytes.append(contentsOf: HeadSerializer.crlf)
    }

    private static func appendInteger(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        HeadSerializer.appendDecimal(value.magnitude > UInt(Int.max) ? Int.max : Int(value.magnitude), to: &bytes)
    }
}

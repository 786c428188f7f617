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
        var text = "larder"
        if hit { text += "; hit" }
        if let fwd { text += "; fwd=\(fwd)" }
        if let fwdStatus { text += "; fwd-status=\(fwdStatus)" }
        if let ttl { text += "; ttl=\(ttl)" }
        if stored { text += "; stored" }
        if collapsed { text += "; collapsed" }
        if let detail {
            let token = detail.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
            text += token ? "; detail=\(detail)" : "; detail=\"\(detail.replacingQuotes())\""
        }
        return text
    }
}

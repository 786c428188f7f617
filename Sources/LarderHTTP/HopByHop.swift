/// Hop-by-hop fields (RFC 9110 §7.6.1): they describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whether or not `Connection` lists them.
    public static let names: [String] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "proxy-authorization", "proxy-authenticate",
    ]

    /// Removes the fixed hop-by-hop fields and every field named in `Connection`.
    public static func strip(_ headers: inout HTTPHeaders) {
        let listed = headers.listElements("Connection")
        guard headers.fields.contains(where: { isHopByHop($0.name, listed: listed) }) else { return }
        headers.removeAll { isHopByHop($0.name, listed: listed) }
    }

    @inline(__always)
    static func isHopByHop(_ name: String, listed: [String]) -> Bool {
        for hop in names where ASCII.equalsIgnoringCase(hop, name) { return true }
        for hop in listed where ASCII.equalsIgnoringCase(hop, name) { return true }
        return false
    }
}

/// Hop-by-hop fields (RFC 9110 §7.6.1): they describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whether or not `Connection` lists them.
    public static let names: [String] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "proxy-authorization", "proxy-authenticate",
    ]

    /// Removes the fixed hop-by-hop fields and every field named in `Connection`.
    ///
    /// Runs on every request and response, so the common cases cost no allocation: a message
    /// without any fixed hop-by-hop field has no `Connection` field either, so nothing it
    /// lists, and is left as it is.
    public static func strip(_ headers: inout HTTPHeaders) {
        guard headers.fields.contains(where: { isAlwaysHopByHop($0.name) }) else { return }
        let listed = headers.listElements("Connection")
        if listed.isEmpty {
            headers.removeAll { isAlwaysHopByHop($0.name) }
        } else {
            headers.removeAll { field in
                isAlwaysHopByHop(field.name) || listed.contains { ASCII.equalsIgnoringCase($0, field.name) }
            }
        }
    }

    /// Whether `name` is one of ``names``, compared only with the names of its length.
    @inline(__always)
    static func isAlwaysHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: ASCII.equalsIgnoringCase(name, "te")
        case 7: ASCII.equalsIgnoringCase(name, "trailer") || ASCII.equalsIgnoringCase(name, "upgrade")
        case 10: ASCII.equalsIgnoringCase(name, "connection") || ASCII.equalsIgnoringCase(name, "keep-alive")
        case 16: ASCII.equalsIgnoringCase(name, "proxy-connection")
        case 17: ASCII.equalsIgnoringCase(name, "transfer-encoding")
        case 18: ASCII.equalsIgnoringCase(name, "proxy-authenticate")
        case 19: ASCII.equalsIgnoringCase(name, "proxy-authorization")
        default: false
        }
    }
}

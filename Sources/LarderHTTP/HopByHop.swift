/// Hop-by-hop fields (RFC 9110 §7.6.1): they describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whether or not `Connection` lists them.
    public static let names: [String] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "proxy-authorization", "proxy-authenticate",
    ]

    /// Removes the fixed hop-by-hop fields, every field named in `Connection`, and `alsoRemoving`
    /// (a response's `Content-Length`, which Larder frames itself).
    ///
    /// Runs on every request and response, so the common cases cost one pass over the fields
    /// and no allocation: the fixed fields and `alsoRemoving` go in that pass, and a
    /// `Connection` element naming a fixed field (`keep-alive`, `upgrade`) is not collected.
    /// Only other listed names (`close` is one: a field named so goes too, RFC 9110 §7.6.1)
    /// are collected there and removed in a second pass.
    public static func strip(_ headers: inout HTTPHeaders, alsoRemoving extra: StaticString? = nil) {
        var listed: [[UInt8]] = []
        headers.removeEachField { name, value in
            if isAlwaysHopByHop(name) {
                if name.count == 10, ASCII.equalsIgnoringCase(name, "connection") {
                    HTTPHeaders.forEachElement(ofList: value) { element in
                        let element = UnsafeRawBufferPointer(element)
                        if !isAlwaysHopByHop(element) { listed.append(Array(element)) }
                        return true
                    }
                }
                return true
            }
            if let extra { return ASCII.equalsIgnoringCase(name, extra) }
            return false
        }
        guard !listed.isEmpty else { return }
        headers.removeFields(whereName: { name in
            listed.contains { listedName in listedName.withUnsafeBufferPointer { ASCII.equalsIgnoringCase(name, $0) } }
        })
    }

    /// Whether `name` is one of ``names``, compared only with the names of its length.
    @inline(__always)
    static func isAlwaysHopByHop(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
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

/// Hop-by-hop fields (RFC 9110 §7.6.1): they describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whether or not `Connection` lists them.
    public static let names: [String] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "proxy-authorization", "proxy-authenticate",
    ]

    /// Removes the fixed hop-by-hop fields, every field named in `Connection`, and `alsoRemoving`
    /// (a response's `Content-Length`, which Larder frames itself) in the same pass.
    ///
    /// Runs on every request and response, so the common cases cost no allocation: a message
    /// without any of those fields is left as it is, and `Connection: keep-alive` names only a
    /// fixed field, so only other listed names are collected (`close` is one: a field named so
    /// goes too, RFC 9110 §7.6.1).
    public static func strip(_ headers: inout HTTPHeaders, alsoRemoving extra: StaticString? = nil) {
        let isExtra: (UnsafeRawBufferPointer) -> Bool = { name in extra.map { ASCII.equalsIgnoringCase(name, $0) } ?? false }
        var any = false
        headers.forEachField { name, _ in any = any || isAlwaysHopByHop(name) || isExtra(name) }
        guard any else { return }
        var listed: [[UInt8]] = []
        headers.forEachListElement("Connection") { element in
            if !isKeepAlive(element) { listed.append(Array(element)) }
            return true
        }
        headers.removeFields(whereName: { name in
            isAlwaysHopByHop(name) || isExtra(name)
                || listed.contains { listedName in listedName.withUnsafeBufferPointer { ASCII.equalsIgnoringCase(name, $0) } }
        })
    }

    /// Whether a `Connection` element is `keep-alive` (ASCII, case-insensitive).
    static func isKeepAlive(_ element: UnsafeBufferPointer<UInt8>) -> Bool {
        ASCII.equalsIgnoringCase(UnsafeRawBufferPointer(element), "keep-alive")
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

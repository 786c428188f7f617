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
        // One pass finds whether anything goes and whether `Connection` names more than
        // keep-alive; a response's usual `Connection: keep-alive` and `Content-Length` then go
        // in a second pass with nothing collected.
        var removing = false
        var namesOthers = false
        headers.forEachField { name, value in
            if isAlwaysHopByHop(name) {
                removing = true
                if !namesOthers, name.count == 10, ASCII.equalsIgnoringCase(name, "connection") {
                    namesOthers = !listsOnlyKeepAlive(value)
                }
            } else if let extra, ASCII.equalsIgnoringCase(name, extra) {
                removing = true
            }
        }
        guard removing else { return }
        var listed: [[UInt8]] = []
        if namesOthers {
            headers.forEachListElement("Connection") { element in
                if !isKeepAlive(element) { listed.append(Array(element)) }
                return true
            }
        }
        headers.removeFields(whereName: { name in
            if isAlwaysHopByHop(name) { return true }
            if let extra, ASCII.equalsIgnoringCase(name, extra) { return true }
            return listed.contains { listedName in listedName.withUnsafeBufferPointer { ASCII.equalsIgnoringCase(name, $0) } }
        })
    }

    /// Whether a `Connection` value's elements are all `keep-alive` (or empty).
    static func listsOnlyKeepAlive(_ value: UnsafeRawBufferPointer) -> Bool {
        HTTPHeaders.forEachElement(ofList: value) { isKeepAlive($0) }
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

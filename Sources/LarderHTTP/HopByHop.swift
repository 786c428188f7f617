/// Hop-by-hop fields (RFC 9110 §7.6.1): they describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whether or not `Connection` lists them.
    public static let fields: [KnownField] = [
        .connection, .keepAlive, .proxyConnection, .te, .trailer, .transferEncoding, .upgrade, .proxyAuthorization,
        .proxyAuthenticate,
    ]

    /// The ``KnownField/bit``s of ``fields``, folded to one constant where it is read.
    @inline(__always)
    static var fixedBits: UInt64 {
        KnownField.connection.bit | KnownField.keepAlive.bit | KnownField.proxyConnection.bit | KnownField.te.bit
            | KnownField.trailer.bit | KnownField.transferEncoding.bit | KnownField.upgrade.bit | KnownField.proxyAuthorization.bit
            | KnownField.proxyAuthenticate.bit
    }

    /// Removes the fixed hop-by-hop fields, every field named in `Connection`, and `alsoRemoving`
    /// (a response's `Content-Length`, which Larder frames itself).
    ///
    /// Runs on every request and response, so the fixed fields, `alsoRemoving` and the known
    /// names `Connection` lists go by their tags (``KnownField``) in one pass that reads no name,
    /// and a head with none of them is left as it is after one word is read. Only listed names
    /// that are not known fields (`close` is one: a field named so goes too, RFC 9110 §7.6.1)
    /// are compared by name, in a second pass.
    public static func strip(_ headers: inout HTTPHeaders, alsoRemoving extra: KnownField? = nil) {
        var doomed = fixedBits | (extra?.bit ?? 0)
        guard headers.containsAny(doomed) else { return }
        var listed: [[UInt8]] = []
        headers.forEachListElement(.connection) { element in
            if let known = KnownField(name: UnsafeRawBufferPointer(element)) {
                doomed |= known.bit
            } else {
                listed.append(Array(element))
            }
            return true
        }
        headers.removeFields(tagged: doomed)
        guard !listed.isEmpty else { return }
        headers.removeFields(whereName: { name in
            listed.contains { listedName in listedName.withUnsafeBufferPointer { ASCII.equalsIgnoringCase(name, $0) } }
        })
    }
}

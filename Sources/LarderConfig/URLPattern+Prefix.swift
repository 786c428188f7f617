extension URLPattern {
    /// Whether some URL with this scheme, host and port whose path and query start with
    /// `pathPrefix` may match: the admin's listings and bans find the routes a URL prefix
    /// reaches (``matches(scheme:host:port:pathAndQuery:)`` is for whole URLs). It may say yes
    /// for a route that no such URL takes in the end (an earlier route wins, a directory is
    /// not a file); never no for one that some such URL takes.
    public func mayMatch(scheme requestScheme: String, host: String, port requestPort: Int, pathPrefix: String) -> Bool {
        if let scheme, scheme != requestScheme { return false }
        if let port, port != requestPort { return false }
        guard matchHost(host) else { return false }
        var text = Array(pathPrefix.utf8)
        if endsPath, let mark = text.firstIndex(of: UInt8(ascii: "?")) {
            // The path is complete: it must match as a whole.
            text.removeSubrange(mark...)
            return URLPattern.glob(path, text)
        }
        // Some start of the glob matches the whole text: what follows it can always be met.
        for end in 0...path.count where URLPattern.glob(Array(path[..<end]), text) { return true }
        return false
    }
}

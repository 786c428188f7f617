extension Route {
    /// The name of the `match` capture that holds the body's digest on a `digest` route.
    public static let digestCapture = "digest"

    /// On a `digest` route, the digest the URL names (lower-case hex), or nil when the route
    /// checks none or the capture is not a digest of its algorithm (the route then does not
    /// match: ``RouteTable/match(method:scheme:host:port:pathAndQuery:)``).
    public func expectedDigest(in pathAndQuery: String) -> Substring? {
        guard let digest, let captured = match.capture(named: Route.digestCapture, in: pathAndQuery), digest.accepts(captured)
        else { return nil }
        return captured
    }
}

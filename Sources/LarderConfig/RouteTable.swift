/// Routes indexed for lookup: routes whose host has no glob are found through a hash of the
/// host, the rest are scanned; candidates are visited in configuration order, so the first
/// matching route wins as written. With hundreds of exact-host routes a request looks at only
/// the routes for its own host plus the glob ones. A `digest` route matches only URLs whose
/// `{digest}` capture is a digest of its algorithm.
public struct RouteTable: Sendable, Equatable {
    public let routes: [Route]
    private let byHost: [String: [Int]]
    private let globbed: [Int]

    public init(_ routes: [Route]) {
        self.routes = routes
        var byHost: [String: [Int]] = [:]
        var globbed: [Int] = []
        for (index, route) in routes.enumerated() {
            if let host = route.match.exactHost {
                byHost[host, default: []].append(index)
            } else {
                globbed.append(index)
            }
        }
        self.byHost = byHost
        self.globbed = globbed
    }

    /// The first route matching the request, or nil (global settings apply).
    public func match(method: String, scheme: String, host: String, port: Int, pathAndQuery: String) -> Route? {
        if routes.isEmpty { return nil }
        let exact = byHost[host] ?? []
        var i = 0
        var j = 0
        while i < exact.count || j < globbed.count {
            let index: Int
            if j >= globbed.count || (i < exact.count && exact[i] < globbed[j]) {
                index = exact[i]
                i += 1
            } else {
                index = globbed[j]
                j += 1
            }
            let route = routes[index]
            if let methods = route.methods, !methods.contains(method) { continue }
            guard route.match.matches(scheme: scheme, host: host, port: port, pathAndQuery: pathAndQuery) else { continue }
            // A digest route keys by the digest alone: a URL that names none is not for it.
            if route.digest != nil, route.expectedDigest(in: pathAndQuery) == nil { continue }
            return route
        }
        return nil
    }
}

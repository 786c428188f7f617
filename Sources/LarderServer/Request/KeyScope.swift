import LarderCache
import LarderConfig
import LarderHTTP

/// The cache keys an admin listing or ban names. Keys are the routes' business
/// (`debian:{path}`, `sha256:{digest}`), URLs the user's: a URL prefix or glob covers the keys
/// that are the URL itself and, for each route with a `key` template that URLs under it may
/// take, the key prefix or glob that route builds from them (`http://deb.debian.org/debian/pool/`
/// gives `debian:/debian/pool/`). Text that is not an http(s) URL is taken as a key pattern.
///
/// A mapped pattern is made only of what the URL determines: the template's parts in order,
/// each filled from the URL, the last one (`{path}` or `{query}`) possibly open. A path followed
/// by a query is whole (`…/pool/a?x=1` names the key of `/pool/a`, not of `/pool/ab`), and a
/// key whose every part is whole is named exactly. A part the URL
/// does not determine, a `match` capture such as a digest, would have to be left open and
/// would reach entries of URLs the request does not name (every `sha256:` entry, whatever its
/// host): such a route is listed in ``notCovered`` instead, its entries found by their exact
/// URL or by key. A key without `{host}` is shared by the hosts its route names (mirrors of
/// one archive): those routes are listed in ``shared``, since the call reaches their entries
/// for every one of those hosts.
struct KeyScope: Sendable, Equatable {
    /// Patterns over keys: the request's own text first (a URL normalized as keys are), then
    /// those its routes build.
    var patterns: [BanPattern]
    /// The routes (their `key`) whose entries the call reaches for several hosts at once.
    var shared: [String] = []
    /// The routes (their `key`) whose entries under the URL the call cannot name.
    var notCovered: [String] = []

    func matches(_ key: String) -> Bool { patterns.contains { $0.matches(key) } }

    /// The scope of `requested` (a prefix or glob) through `routes`.
    static func resolve(_ requested: BanPattern, routes: RouteTable) -> KeyScope {
        let (text, isGlob): (String, Bool)
        switch requested {
        case .prefix(let prefix): (text, isGlob) = (prefix, false)
        case .glob(let glob): (text, isGlob) = (glob, true)
        case .exact: return KeyScope(patterns: [requested])
        }
        guard let url = Parts(text, isGlob: isGlob) else { return KeyScope(patterns: [requested]) }
        let own: BanPattern = isGlob ? .glob(url.own) : .prefix(url.own)
        var scope = KeyScope(patterns: [own])
        func add(_ pattern: BanPattern) {
            if !scope.patterns.contains(pattern) { scope.patterns.append(pattern) }
        }
        // A text without a star that is a whole URL names that URL's own key, whatever its route:
        // whole when the route's key takes nothing the text may go on with, else a prefix. A key
        // of the match's captures covers what the route reaches under the text (a digest is
        // whole or the route does not apply); any other is mapped again below.
        var exactRoute: KeyTemplate?
        if !url.pathAndQuery.contains("*"), let exact = try? AbsoluteURL(parsing: url.normalized),
            let route = routes.match(
                method: "GET", scheme: exact.scheme, host: exact.host, port: exact.port, pathAndQuery: exact.pathAndQuery),
            route.hasCustomKey, let template = route.key
        {
            let key = CacheKey(exact, route: route).url
            let captures = template.parts.contains { if case .capture = $0 { true } else { false } }
            switch (isGlob, captures, url.key(template, isGlob: false)) {
            case (true, _, _): add(.glob(key))
            case (false, true, _), (false, false, .some(.prefix)): add(.prefix(key))
            case (false, false, _): add(.exact(key))
            }
            if captures { exactRoute = template }
        }
        let literal = url.pathAndQuery.prefix { $0 != "*" }
        for route in routes.routes {
            guard let template = route.key,
                route.match.mayMatch(scheme: url.scheme, host: url.host, port: url.port, pathPrefix: String(literal))
            else { continue }
            guard let key = url.key(template, isGlob: isGlob) else {
                if template != exactRoute, !scope.notCovered.contains(template.text) { scope.notCovered.append(template.text) }
                continue
            }
            add(key)
            if !template.parts.contains(.host), !scope.shared.contains(template.text) { scope.shared.append(template.text) }
        }
        return scope
    }

    /// An http(s) URL prefix or glob cut into what keys are built from: nil for text that is
    /// not one, or whose authority is not a host and port or holds a star. Text that stops at
    /// the authority (`http://host:8080`, or `http://host:8080*` as a glob) names what follows
    /// it as `/` would through the routes: every path there. Its own pattern stays as written,
    /// since the text may go on with the host name too (`http://deb.deb`).
    struct Parts {
        let scheme: String
        let host: String
        let port: Int
        /// What follows the authority (`/…` or `?…`), percent-escapes upper-cased.
        let pathAndQuery: String
        /// The text as keys are kept: scheme and host lower case, no default port, `/` after
        /// the authority.
        let normalized: String
        /// The text as keys are kept, and no `/` put after the authority.
        let own: String

        init?(_ text: String, isGlob: Bool) {
            let lowered = text.prefix(8).lowercased()
            let scheme = lowered.hasPrefix("https://") ? "https" : lowered.hasPrefix("http://") ? "http" : nil
            guard let scheme else { return nil }
            let rest = text.dropFirst(scheme.count + 3)
            let end = rest.firstIndex { $0 == "/" || $0 == "?" || (isGlob && $0 == "*") } ?? rest.endIndex
            guard !rest[..<end].contains("*"), let parsed = try? AbsoluteURL(parsing: "\(scheme)://\(rest[..<end])/") else {
                return nil
            }
            self.scheme = scheme
            host = parsed.host
            port = parsed.port
            let tail = CacheKey.normalizePercentEscapes(String(rest[end...]))
            pathAndQuery = tail.hasPrefix("/") ? tail : "/\(tail)"
            normalized = parsed.withPath(pathAndQuery)
            // A query right after the authority is the root's (`http://h?x` is `http://h/?x`).
            own = tail.isEmpty || tail.hasPrefix("*") ? String(parsed.withPath("/").dropLast()) + tail : normalized
        }

        /// The key pattern `template` builds from these parts, or nil when a part it needs is
        /// not determined by them.
        func key(_ template: KeyTemplate, isGlob: Bool) -> BanPattern? {
            let mark = pathAndQuery.firstIndex(of: "?")
            let path = String(mark.map { pathAndQuery[..<$0] } ?? pathAndQuery[...])
            let query = mark.map { String(pathAndQuery[pathAndQuery.index(after: $0)...]) }
            var key = ""
            var remaining = template.parts[...]
            while let part = remaining.popFirst() {
                switch part {
                case .literal(let text):
                    if isGlob, text.contains("*") { return nil }
                    key += text
                case .scheme: key += scheme
                case .host: key += host
                case .port: key += String(port)
                case .path:
                    key += path
                    // Without a query the path may go on: the key pattern ends here. With one the
                    // path is whole, and the parts after it are built as the template writes them.
                    if query == nil { return open(key, rest: remaining, isGlob: isGlob) }
                case .query:
                    guard let query else { return nil }
                    key += query
                    // A glob's query is as written, its stars standing for what they stand for.
                    if isGlob { continue }
                    // A prefix's query may go on: a part after it that the URL determines (a
                    // path, a host) could not be told from the query's tail, and would be
                    // reached for any value.
                    guard remaining.allSatisfy({ if case .literal = $0 { true } else { false } }) else { return nil }
                    return .prefix(key)
                case .capture:
                    return nil
                }
            }
            return isGlob ? .glob(key) : .exact(key)
        }

        /// A key pattern that ends inside a part: a prefix, or a glob whose last star stands
        /// for the parts after it.
        private func open(_ key: String, rest: ArraySlice<KeyTemplate.Part>, isGlob: Bool) -> BanPattern? {
            guard isGlob else { return .prefix(key) }
            return rest.isEmpty || key.hasSuffix("*") ? .glob(key) : nil
        }
    }
}

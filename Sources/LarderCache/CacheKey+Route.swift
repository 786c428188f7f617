import LarderConfig
import LarderHTTP

extension CacheKey {
    /// The key a request for `url` is stored under on `route`: the normalized URL, unless the
    /// route's `key` template or `ignore_query` says otherwise (Squid's Store-ID). Percent-escapes
    /// are normalized either way.
    public init(_ url: AbsoluteURL, route: Route?) {
        guard let route, route.hasCustomKey else {
            self.init(url)
            return
        }
        let pathAndQuery = url.pathAndQuery
        let mark = pathAndQuery.firstIndex(of: "?")
        let path = mark.map { pathAndQuery[..<$0] } ?? pathAndQuery[...]
        var query = mark.map { String(pathAndQuery[pathAndQuery.index(after: $0)...]) }
        if let kept = query, !route.ignoreQuery.isEmpty {
            query = CacheKey.dropping(route.ignoreQuery, from: kept)
        }
        let text: String
        if let template = route.key {
            let captures = route.match.captures(in: pathAndQuery)
            text = template.parts.map { part in
                switch part {
                case .literal(let literal): literal
                case .scheme: url.scheme
                case .host: url.host
                case .port: String(url.port)
                case .path: String(path)
                case .query: query ?? ""
                case .capture(let name): captures[name] ?? ""
                }
            }.joined()
        } else {
            text = url.withPath(query.map { $0.isEmpty ? String(path) : "\(path)?\($0)" } ?? String(path))
        }
        self.init(normalized: text.contains("%") ? CacheKey.normalizePercentEscapes(text) : text)
    }

    /// `query` without the parameters whose names match one of `globs` (case-insensitively),
    /// the others in their order.
    static func dropping(_ globs: [String], from query: String) -> String {
        let patterns = globs.map { Array($0.lowercased().utf8) }
        return query.split(separator: "&", omittingEmptySubsequences: false).filter { parameter in
            let name = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let lowered = Array(name.lowercased().utf8)
            return !patterns.contains { URLPattern.glob($0, lowered) }
        }.joined(separator: "&")
    }
}

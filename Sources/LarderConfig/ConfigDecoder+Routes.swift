import LarderIO

extension ConfigDecoder {
    /// One `[[route]]` table: its match, key, digest, policy and overrides, each checked
    /// where it is written.
    mutating func decodeRoute(_ table: ConfigTable, defaults: RetryConfig) -> Route? {
        guard let matchEntry = table.entries.first(where: { $0.key == "match" }) else {
            fail("[[route]] needs a 'match' pattern such as \"http://*.example.com/*\"", at: table.position)
            return nil
        }
        guard let matchText = string(matchEntry.value, "match") else { return nil }
        let pattern: URLPattern
        do {
            pattern = try URLPattern(parsing: matchText)
        } catch {
            // Point inside the string: one past the opening quote plus the offset in the pattern.
            let position = SourcePosition(line: matchEntry.value.position.line, column: matchEntry.value.position.column + 1 + error.offset)
            fail("invalid route match: \(error.message)", at: position)
            return nil
        }
        var route = Route(match: pattern)
        for entry in table.entries where entry.key != "match" {
            let value = entry.value
            switch entry.key {
            case "methods":
                if let list = stringArray(value, entry.key) {
                    var methods: [String] = []
                    for item in list {
                        if !item.text.isEmpty, item.text.utf8.allSatisfy({ ($0 >= 65 && $0 <= 90) || $0 == 45 }) {
                            methods.append(item.text)
                        } else {
                            fail("\"\(item.text)\" is not an HTTP method like \"GET\" (upper case)", at: item.position)
                        }
                    }
                    route.methods = methods
                }
            case "policy":
                route.policy = choice(value, entry.key, CachePolicy.self)
            case "ttl":
                route.ttl = duration(value, entry.key, minimum: .zero)
            case "dedup":
                route.dedup = choice(value, entry.key, DedupPolicy.self)
            case "timeout":
                route.timeout = duration(value, entry.key, minimum: .milliseconds(1))
            case "min_rate":
                route.minRate = size(value, entry.key, range: 0...(1 << 40)).map { Int($0) }
            case "idempotent":
                route.idempotent = boolean(value, entry.key)
            case "parent":
                if let text = string(value, entry.key) {
                    if text == "direct" || ConfigDecoder.isProxyURL(text) {
                        route.parent = text
                    } else {
                        fail(
                            "a route's parent is a proxy URL like \"http://proxy.example:3128\" or \"direct\", got \"\(text)\"",
                            at: value.position)
                    }
                }
            case "key":
                if let text = string(value, entry.key) {
                    do throws(KeyTemplate.ParseError) {
                        let template = try KeyTemplate(parsing: text)
                        for case .capture(let name) in template.parts where !pattern.captureNames.contains(name) {
                            let offset = text.distance(
                                from: text.startIndex, to: text.firstRange(of: "{\(name)}")?.lowerBound ?? text.startIndex)
                            throw KeyTemplate.ParseError(
                                message: "unknown placeholder {\(name)}; a key uses {scheme} {host} {port} {path} {query} "
                                    + "and the match's captures ("
                                    + pattern.captureNames.compactMap { $0.map { "{\($0)}" } }.joined(separator: " ")
                                    + ")", offset: offset)
                        }
                        route.key = template
                    } catch {
                        let position = SourcePosition(line: value.position.line, column: value.position.column + 1 + error.offset)
                        fail("invalid route key: \(error.message)", at: position)
                    }
                }
            case "ignore_query":
                if let list = stringArray(value, entry.key) {
                    for item in list where item.text.isEmpty || item.text.contains(where: { "&=?# ".contains($0) }) {
                        fail("ignore_query lists query parameter names (globs like \"X-Amz-*\"), got \"\(item.text)\"", at: item.position)
                    }
                    route.ignoreQuery = list.map(\.text)
                }
            case "immutable":
                route.immutable = boolean(value, entry.key) ?? false
            case "digest":
                route.digest = choice(value, entry.key, DigestAlgorithm.self)
            default:
                fail(
                    "unknown key '\(entry.key)' in [[route]]\(Suggestions.hint(for: entry.key, in: ConfigDecoder.routeKeys + ["match"]))",
                    at: entry.keyPosition)
            }
        }
        if route.digest != nil { checkDigestRoute(&route, table: table) }
        // A key that leaves out part of the URL lets two URLs share an entry: only objects that
        // never change under a URL may.
        if !route.immutable, route.key?.leavesOutPartOfURL == true || !route.ignoreQuery.isEmpty {
            let entry = table.entries.first { $0.key == "key" } ?? table.entries.first { $0.key == "ignore_query" }
            fail(
                "this route's key leaves out part of the URL, so two different objects could share an entry; "
                    + "allowed only with immutable = true (objects that never change under one URL)",
                at: entry?.keyPosition ?? table.position)
        }
        // Nor may a key leave out the host where the match allows several: a client could fill
        // the entry from a host it runs, for the clients of every other host.
        if let key = route.key, !key.parts.contains(.host), pattern.exactHost == nil, route.digest == nil,
            let entry = table.entries.first(where: { $0.key == "key" })
        {
            fail(
                "key \"\(key)\" leaves out {host} on a route whose match allows several hosts (\"\(pattern)\"): "
                    + "any client could fill the entry from a host it runs, and the clients of the other hosts would get "
                    + "that body. Add {host} to the key, or name the host in match (one [[route]] per mirror, with the "
                    + "same key), or check bodies against a digest the URL carries (digest = \"sha256\" and a {digest} "
                    + "capture in match)",
                at: entry.value.position)
        }
        if route.immutable {
            route.policy = route.policy ?? .cacheFirst
            route.ttl = route.ttl ?? .seconds(10 * 365 * 86_400)
        }
        for subtable in table.subtables {
            guard subtable.name == "retry" else {
                fail("unknown table [route.\(subtable.name)]\(Suggestions.hint(for: subtable.name, in: ["retry"]))", at: subtable.position)
                continue
            }
            var retry = defaults
            for entry in subtable.entries {
                guard ConfigDecoder.retryKeys.contains(entry.key) else {
                    fail(
                        "unknown key '\(entry.key)' in [route.retry]\(Suggestions.hint(for: entry.key, in: ConfigDecoder.retryKeys))",
                        at: entry.keyPosition)
                    continue
                }
                guard !entry.key.hasPrefix("budget_") else {
                    fail("'\(entry.key)' is daemon-wide: set it in [retry], not per route", at: entry.keyPosition)
                    continue
                }
                applyRetry(key: entry.key, value: entry.value, to: &retry)
            }
            route.retry = retry
        }
        return route
    }

    /// A `digest` route: its match must capture `{digest}`, and its key (by default
    /// `"<algorithm>:{digest}"`, one entry per body whatever the host) must hold it; its objects
    /// are immutable, since the digest pins them.
    private mutating func checkDigestRoute(_ route: inout Route, table: ConfigTable) {
        guard let digest = route.digest, let entry = table.entries.first(where: { $0.key == "digest" }) else { return }
        route.immutable = true
        guard route.match.captureNames.contains(Route.digestCapture) else {
            fail(
                "a digest route needs a {digest} capture in match, where the URL carries the hash "
                    + "(\"*://*/*/by-hash/SHA256/{digest}\", \"*://*:*/v2/*/blobs/sha256:{digest}\")",
                at: entry.value.position)
            return
        }
        guard let key = route.key else {
            route.key = try? KeyTemplate(parsing: "\(digest.rawValue):{\(Route.digestCapture)}")
            return
        }
        if !key.parts.contains(.capture(Route.digestCapture)), let keyEntry = table.entries.first(where: { $0.key == "key" }) {
            fail(
                "the key of a digest route must contain {digest}, or bodies with different digests would share an entry",
                at: keyEntry.value.position)
        }
    }
}

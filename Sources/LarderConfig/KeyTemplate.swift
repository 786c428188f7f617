/// A route's `key`: how its cache key is built from the request URL (Squid's Store-ID), so that
/// copies of one object under several URLs (mirrors) are stored once. Literal text, the
/// placeholders `{scheme}`, `{host}`, `{port}`, `{path}` (without the query) and `{query}`
/// (after `ignore_query`, without the `?`; only right after the key's first `?`), and the
/// route's `match` captures (`{name}`): `"debian:{path}"` merges mirrors laid out alike,
/// `"debian:{file}"` with `match = "http://*/{base}/pool/{file}"` those that are not.
public struct KeyTemplate: Sendable, Hashable, CustomStringConvertible {
    public enum Part: Sendable, Hashable {
        case literal(String)
        case scheme, host, port, path, query
        /// What the route's `match` captured under this name.
        case capture(String)
    }

    public let text: String
    public let parts: [Part]

    /// Why a template was refused, and at which character offset.
    public struct ParseError: Error, Equatable {
        public let message: String
        public let offset: Int
    }

    public var description: String { text }

    public init(parsing text: String) throws(ParseError) {
        self.text = text
        if let hash = text.firstIndex(of: "#") {
            // Reserved: an object's slices are stored under its key + "#slice=N".
            throw ParseError(
                message: "a key may not contain '#' (it marks an object's slices)", offset: text.distance(from: text.startIndex, to: hash))
        }
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw ParseError(message: "'{' without a closing '}'", offset: text.distance(from: text.startIndex, to: open))
            }
            let name = rest[rest.index(after: open)..<close]
            let part: Part
            switch name {
            case "scheme": part = .scheme
            case "host": part = .host
            case "port": part = .port
            case "path": part = .path
            case "query":
                // Keys are shown where URLs are (listings, the access log, a ban's answer), and
                // log.redact_query hides the values after a key's first '?' only.
                guard literal.hasSuffix("?"), !text[..<open].dropLast().contains("?") else {
                    throw ParseError(
                        message:
                            "{query} only right after a '?', the key's first (\"name:{path}?{query}\"): "
                            + "log.redact_query hides the values after it, and there only",
                        offset: text.distance(from: text.startIndex, to: open))
                }
                part = .query
            default:
                guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                    throw ParseError(
                        message:
                            "unknown placeholder {\(name)}; a key uses {scheme} {host} {port} {path} {query} and the match's {captures}",
                        offset: text.distance(from: text.startIndex, to: open))
                }
                part = .capture(String(name))
            }
            if !literal.isEmpty { parts.append(.literal(literal)) }
            literal = ""
            parts.append(part)
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if literal.contains("}") {
            throw ParseError(
                message: "'}' without an opening '{'", offset: text.distance(from: text.startIndex, to: text.lastIndex(of: "}")!))
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        guard parts.contains(where: { if case .literal = $0 { false } else { true } }) else {
            throw ParseError(message: "a key needs at least one placeholder ({path} most often), or every URL shares one entry", offset: 0)
        }
        self.parts = parts
    }

    /// Whether some part of the URL does not reach the key, so that two different URLs can
    /// share an entry: allowed only on routes whose objects are immutable.
    public var leavesOutPartOfURL: Bool {
        ![Part.scheme, .host, .port, .path, .query].allSatisfy(parts.contains)
    }
}

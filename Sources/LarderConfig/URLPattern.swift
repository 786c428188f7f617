/// A `[[route]]` `match` pattern: `scheme://host[:port]/path` where `*` is a glob.
///
/// - scheme: `http`, `https` or `*`.
/// - host: labels separated by dots; a label that is exactly `*` matches one or more whole
///   labels (`*.example.com` matches `a.example.com` and `a.b.example.com`, not `example.com`);
///   a `*` inside a label matches characters within that label (`mirror*.example.org`).
/// - port: omitted means the scheme's default port; `:*` means any port.
/// - path: a glob over path and query where `*` matches any run of characters, `/` included;
///   omitted means `/*` (everything on that host). `{name}` matches as `*` does and names what
///   it matched, for the route's `key` (`"http://*/{dist}/pool/{file}"`).
/// - a path ending in `?*` (and holding no other `?`) ends the path there: what comes before
///   matches the path alone, and any query, or none, may follow (`/*.rpm?*` matches
///   `/a/b.rpm` and `/a/b.rpm?x=1`, not `/search?q=b.rpm` or `/b.rpm.html`). The path so
///   ended names a file: one ending in `/` (a directory) never matches (`/*/repodata/*?*`
///   does not match `/a/repodata/`).
public struct URLPattern: Sendable, Hashable, CustomStringConvertible {
    public let text: String
    let scheme: String?
    let hostLabels: [String]
    /// nil: any port.
    let port: Int?
    let path: [UInt8]
    /// The pattern ended in `?*`: `path` (without it) matches the path before any query.
    let endsPath: Bool
    /// For each `*` of `path`, in order, the capture name it was written as (`{name}`), or nil.
    public let captureNames: [String?]

    /// Why a pattern was rejected, and at which character offset of the text.
    public struct ParseError: Error, Equatable {
        public let message: String
        public let offset: Int
    }

    public var description: String { text }

    /// Whether the host part is `*` (any host).
    public var anyHost: Bool { hostLabels == ["*"] }

    /// The host if it has no glob (an index key for fast route lookup).
    public var exactHost: String? {
        hostLabels.contains { $0.contains("*") } ? nil : hostLabels.joined(separator: ".")
    }

    public init(parsing text: String) throws(ParseError) {
        self.text = text
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw ParseError(message: "expected a URL pattern like \"http://*.example.com/*\"", offset: 0)
        }
        let schemeEnd = colon..<text.index(colon, offsetBy: 3)
        let schemeText = text[..<schemeEnd.lowerBound].lowercased()
        switch schemeText {
        case "http", "https": scheme = schemeText
        case "*": scheme = nil
        default: throw ParseError(message: "scheme must be http, https or *, got \"\(schemeText)\"", offset: 0)
        }
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        let authorityOffset = text.distance(from: text.startIndex, to: schemeEnd.upperBound)
        guard !authority.isEmpty else { throw ParseError(message: "pattern has an empty host", offset: authorityOffset) }
        var hostPart = authority
        var portValue: Int?? = .some(nil)  // .some(nil): default port; nil: any
        if let colon = authority.lastIndex(of: ":"), !authority.hasPrefix("[") || authority[..<colon].hasSuffix("]") {
            let portText = authority[authority.index(after: colon)...]
            hostPart = authority[..<colon]
            if portText == "*" {
                portValue = nil
            } else if let number = Int(portText), (1...65535).contains(number), portText.allSatisfy({ $0.isNumber }) {
                portValue = .some(number)
            } else {
                throw ParseError(
                    message: "invalid port \"\(portText)\" in pattern",
                    offset: text.distance(from: text.startIndex, to: colon) + 1)
            }
        }
        let labels = hostPart.lowercased().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        for label in labels {
            let valid =
                !label.isEmpty && label.allSatisfy { $0.isLetter && $0.isASCII || $0.isNumber && $0.isASCII || "-_*[]:".contains($0) }
            guard valid else {
                throw ParseError(message: "invalid host \"\(hostPart)\" in pattern", offset: authorityOffset)
            }
        }
        hostLabels = labels
        let defaultPort = scheme == "https" ? 443 : 80
        switch portValue {
        case .none: port = nil
        case .some(.none): port = scheme == nil ? nil : defaultPort
        case .some(.some(let number)): port = number
        }
        let pathText = afterScheme[authorityEnd...]
        if pathText.contains(where: { $0 == " " || $0 == "#" || !$0.isASCII }) {
            throw ParseError(
                message: "invalid character in pattern path",
                offset: text.distance(from: text.startIndex, to: authorityEnd))
        }
        var globbed: [UInt8] = []
        var names: [String?] = []
        var rest = pathText.isEmpty ? Substring("/*") : pathText
        while let first = rest.first {
            if first == "*" {
                names.append(nil)
                globbed.append(UInt8(ascii: "*"))
                rest = rest.dropFirst()
            } else if first == "{" {
                let offset = text.distance(from: text.startIndex, to: rest.startIndex)
                guard let close = rest.firstIndex(of: "}") else { throw ParseError(message: "'{' without a closing '}'", offset: offset) }
                let name = String(rest[rest.index(after: rest.startIndex)..<close])
                guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }),
                    !["scheme", "host", "port", "path", "query"].contains(name), !names.contains(name)
                else {
                    throw ParseError(
                        message: "a capture is {name} with letters, digits and _, not a key placeholder, once per pattern; got {\(name)}",
                        offset: offset)
                }
                names.append(name)
                globbed.append(UInt8(ascii: "*"))
                rest = rest[rest.index(after: close)...]
            } else {
                globbed.append(contentsOf: String(first).utf8)
                rest = rest.dropFirst()
            }
        }
        // `?*` at the end: the path stops before the query (RFC 3986 §3.4: the first `?`).
        endsPath =
            globbed.count >= 2 && globbed.suffix(2).elementsEqual("?*".utf8) && names.last == .some(nil)
            && globbed.dropLast(2).firstIndex(of: UInt8(ascii: "?")) == nil
        path = endsPath ? Array(globbed.dropLast(2)) : globbed
        captureNames = names
    }

    /// What the named captures of the path matched in `pathAndQuery` (empty without captures
    /// or when it does not match). The leftmost stars match as little as they can, as
    /// ``glob(_:_:)`` decides.
    public func captures(in pathAndQuery: String) -> [String: String] {
        guard captureNames.contains(where: { $0 != nil }) else { return [:] }
        let text = Array(pathAndQuery.utf8)
        guard let spans = starSpans(in: text) else { return [:] }
        var captured: [String: String] = [:]
        for (name, span) in zip(captureNames, spans) {
            if let name { captured[name] = String(decoding: text[span], as: UTF8.self) }
        }
        return captured
    }

    /// What the capture `name` matched in `pathAndQuery`, or nil when the pattern has no such
    /// capture or does not match: ``captures(in:)`` for one name, without building the others.
    public func capture(named name: String, in pathAndQuery: String) -> Substring? {
        guard let index = captureNames.firstIndex(of: name) else { return nil }
        guard let spans = starSpans(in: Array(pathAndQuery.utf8)) else { return nil }
        let utf8 = pathAndQuery.utf8
        let span = spans[index]
        return pathAndQuery[utf8.index(utf8.startIndex, offsetBy: span.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: span.upperBound)]
    }

    /// What each `*` of the pattern matched in `text` (a path and query), in order, the `?*`
    /// that ends the path taking the query after its `?` (or nothing): nil when it does not match.
    private func starSpans(in text: [UInt8]) -> [Range<Int>]? {
        guard let globbed = globbedPart(of: text), var spans = URLPattern.starSpans(path, globbed) else { return nil }
        if endsPath { spans.append(globbed.count < text.count ? (globbed.count + 1)..<text.count : text.count..<text.count) }
        return spans
    }

    /// The part of `text` (a path and query) that `path` globs over: all of it, or, for a
    /// pattern that ends the path (`?*`), the path before the query (RFC 3986 §3.4: the first
    /// `?`). That path names a file: one that ends in `/` names a directory (an index listing
    /// that changes, such as `repodata/` or `by-hash/SHA256/`), which no `*` may take for a
    /// file (nil).
    private func globbedPart(of text: [UInt8]) -> ArraySlice<UInt8>? {
        guard endsPath else { return text[...] }
        let end = text.firstIndex(of: UInt8(ascii: "?")) ?? text.count
        guard end > 0, text[end - 1] != UInt8(ascii: "/") else { return nil }
        return text[..<end]
    }

    /// ``glob(_:_:)`` recording what each `*` matched: nil when it does not match. `text`
    /// starts at index 0 (a prefix of the text).
    static func starSpans(_ pattern: [UInt8], _ text: ArraySlice<UInt8>) -> [Range<Int>]? {
        var p = 0
        var t = 0
        var star = -1
        var spans: [Range<Int>] = []
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                spans.append(t..<t)
                p += 1
            } else if p < pattern.count, pattern[p] == text[t] {
                p += 1
                t += 1
            } else if star >= 0 {
                // The last star takes one more byte; earlier ones keep what they matched.
                p = star + 1
                let span = spans[spans.count - 1]
                spans[spans.count - 1] = span.lowerBound..<(span.upperBound + 1)
                t = span.upperBound + 1
            } else {
                return nil
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") {
            spans.append(t..<t)
            p += 1
        }
        return p == pattern.count ? spans : nil
    }

    /// Whether the URL (scheme, lower-cased host, port, path and query) matches.
    public func matches(scheme requestScheme: String, host: String, port requestPort: Int, pathAndQuery: String) -> Bool {
        if let scheme, scheme != requestScheme { return false }
        if let port, port != requestPort { return false }
        guard matchHost(host) else { return false }
        guard let globbed = globbedPart(of: Array(pathAndQuery.utf8)) else { return false }
        return URLPattern.glob(path, globbed)
    }

    func matchHost(_ host: String) -> Bool {
        if let exact = exactHost { return exact == host }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        return URLPattern.matchLabels(hostLabels[...], labels[...])
    }

    private static func matchLabels(_ pattern: ArraySlice<String>, _ labels: ArraySlice<Substring>) -> Bool {
        guard let first = pattern.first else { return labels.isEmpty }
        if first == "*" {
            // One or more whole labels.
            guard !labels.isEmpty else { return false }
            var taken = 1
            while taken <= labels.count {
                if matchLabels(pattern.dropFirst(), labels.dropFirst(taken)) { return true }
                taken += 1
            }
            return false
        }
        guard let label = labels.first, glob(Array(first.utf8), Array(label.utf8)) else { return false }
        return matchLabels(pattern.dropFirst(), labels.dropFirst())
    }

    /// Glob with `*` only (any run of bytes, `/` included; every other byte stands for itself);
    /// linear in practice (backtracks to the last star).
    public static func glob(_ pattern: [UInt8], _ text: [UInt8]) -> Bool {
        glob(pattern, text[...])
    }

    /// ``glob(_:_:)`` over a slice that starts at index 0 (a prefix of the text).
    static func glob(_ pattern: [UInt8], _ text: ArraySlice<UInt8>) -> Bool {
        var p = 0
        var t = 0
        var star = -1
        var mark = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                mark = t
                p += 1
            } else if p < pattern.count, pattern[p] == text[t] {
                p += 1
                t += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}

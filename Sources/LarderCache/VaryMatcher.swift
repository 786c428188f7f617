import LarderHTTP

/// Secondary keys (RFC 9111 §4.1): a stored response carries the values of the request
/// headers its `Vary` names, and is used only for requests whose values match.
public enum VaryMatcher {
    /// The normalized request values for the headers named by the response's `Vary`
    /// (lower-cased names; absent headers map to the empty string).
    public static func values(for responseHeaders: HTTPHeaders, request: HTTPHeaders) -> [String: String] {
        let names = responseHeaders.contains(.vary) ? responseHeaders.listElements("Vary") : []
        guard !names.isEmpty else { return [:] }
        var result: [String: String] = [:]
        for name in names where name != "*" {
            result[name] = normalize(name: name, in: request)
        }
        return result
    }

    /// Whether one request may be answered by variants stored for both `first` and `second`:
    /// they agree on every field both name (a field one names only, the request can have as
    /// that one wants).
    public static func overlap(_ first: [String: String], _ second: [String: String]) -> Bool {
        let (fewer, more) = first.count <= second.count ? (first, second) : (second, first)
        return fewer.allSatisfy { name, value in more[name].map { $0 == value } ?? true }
    }

    /// Whether `stored` may answer a request with `request` headers.
    @inline(__always)
    public static func matches(_ stored: StoredResponse, request: HTTPHeaders) -> Bool {
        matches(vary: stored.varyValues, request: request)
    }

    /// Whether a variant stored for these request values may answer `request`.
    @inline(__always)
    public static func matches(vary: [String: String], request: HTTPHeaders) -> Bool {
        if vary.isEmpty { return true }
        for (name, value) in vary {
            guard let bytes = normalizedBytes(name: name, in: request) else {
                if normalize(name: name, request.values(name)) != value { return false }
                continue
            }
            var value = value
            guard value.withUTF8({ $0.elementsEqual(bytes) }) else { return false }
        }
        return true
    }

    /// The normalized value of the request's `name` fields (``normalize(name:_:)``).
    static func normalize(name: String, in request: HTTPHeaders) -> String {
        guard let bytes = normalizedBytes(name: name, in: request) else { return normalize(name: name, request.values(name)) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// ``normalize(name:_:)`` worked out on the fields' bytes, for fields that are ASCII (nil
    /// otherwise): there a character is a byte, so splitting, trimming, lower-casing and
    /// sorting bytes give the very same text, without a String per element. Every hit on a
    /// response that varies (most text does, on Accept-Encoding) asks for it.
    static func normalizedBytes(name: String, in request: HTTPHeaders) -> [UInt8]? {
        let unordered = unorderedTokenLists.contains(name)
        var text: [UInt8] = []
        var elements: [Range<Int>] = []
        var ascii = true
        request.forEachListElement(name) { element in
            guard element.allSatisfy({ $0 < 0x80 }) else {
                ascii = false
                return false
            }
            let start = text.count
            if !unordered {
                text.append(contentsOf: element)
            } else if !element.contains(where: { $0 == 0x20 || $0 == 0x09 }) {
                for byte in element { text.append(ASCII.lower(byte)) }
            } else {
                // Parameters with their spaces around `;` dropped: the pieces between
                // semicolons, empty ones left out, each trimmed (a blank one stays, empty).
                var piece = 0
                var first = true
                while piece < element.count {
                    var end = piece
                    while end < element.count, element[end] != UInt8(ascii: ";") { end += 1 }
                    if end > piece {
                        var low = piece
                        var high = end
                        while low < high, element[low] == 0x20 || element[low] == 0x09 { low += 1 }
                        while high > low, element[high - 1] == 0x20 || element[high - 1] == 0x09 { high -= 1 }
                        if !first { text.append(UInt8(ascii: ";")) }
                        first = false
                        for byte in element[low..<high] { text.append(ASCII.lower(byte)) }
                    }
                    piece = end + 1
                }
            }
            elements.append(start..<text.count)
            return true
        }
        guard ascii else { return nil }
        if unordered { elements.sort { text[$0].lexicographicallyPrecedes(text[$1]) } }
        var result: [UInt8] = []
        result.reserveCapacity(text.count + elements.count)
        for (index, range) in elements.enumerated() {
            if index > 0 { result.append(UInt8(ascii: ",")) }
            result.append(contentsOf: text[range])
        }
        return result
    }

    /// Combines field lines into one value, with list elements trimmed; for headers whose
    /// elements are order-insensitive sets of tokens, the elements are also lower-cased and sorted.
    static func normalize(name: String, _ values: [String]) -> String {
        guard !values.isEmpty else { return "" }
        var elements: [String] = []
        for value in values {
            for element in value.split(separator: ",", omittingEmptySubsequences: true) {
                let trimmed = ASCII.trimOWS(element)
                if !trimmed.isEmpty { elements.append(String(trimmed)) }
            }
        }
        if unorderedTokenLists.contains(name) {
            elements = elements.map { $0.lowercased().replacingSpacesAroundSemicolons() }.sorted()
        }
        return elements.joined(separator: ",")
    }

    /// Headers whose list order carries no meaning (preferences are given by q-values).
    static let unorderedTokenLists: Set<String> = ["accept-encoding", "accept", "accept-language", "accept-charset"]
}

extension String {
    fileprivate func replacingSpacesAroundSemicolons() -> String {
        guard utf8.contains(UInt8(ascii: " ")) || utf8.contains(UInt8(ascii: "\t")) else { return self }
        return split(separator: ";").map { ASCII.trimOWS($0) }.joined(separator: ";")
    }
}

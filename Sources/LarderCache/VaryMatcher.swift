import LarderHTTP

/// Secondary keys (RFC 9111 §4.1): a stored response carries the values of the request
/// headers its `Vary` names, and is used only for requests whose values match.
public enum VaryMatcher {
    /// The normalized request values for the headers named by the response's `Vary`
    /// (lower-cased names; absent headers map to the empty string).
    public static func values(for responseHeaders: HTTPHeaders, request: HTTPHeaders) -> [String: String] {
        let names = responseHeaders.listElements("Vary")
        guard !names.isEmpty else { return [:] }
        var result: [String: String] = [:]
        for name in names where name != "*" {
            result[name] = normalize(name: name, request.values(name))
        }
        return result
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
        for (name, value) in vary where normalize(name: name, request.values(name)) != value {
            return false
        }
        return true
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

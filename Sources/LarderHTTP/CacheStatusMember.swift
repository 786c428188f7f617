/// One cache's member of a `Cache-Status` field (RFC 9211 §2): the cache's name and its
/// parameters, read as a Structured Fields list (RFC 8941 §3.1), so a `;` or `,` inside a
/// quoted `key` or `detail` is part of that value.
public struct CacheStatusMember: Sendable, Equatable {
    /// The cache's identifier, e.g. `larder`.
    public let cache: String
    /// The parameters in order: a bare name (`hit`, `stored`) has the value `""`; a quoted
    /// string is given unquoted.
    public let parameters: [Parameter]

    public struct Parameter: Sendable, Equatable {
        public let name: String
        public let value: String
    }

    /// The value of parameter `name`, `""` for a bare one, nil when absent.
    public func parameter(_ name: String) -> String? {
        parameters.first { $0.name == name }?.value
    }

    /// Served from this cache (RFC 9211 §2.1).
    public var isHit: Bool { parameter("hit") != nil }

    /// The last member `cache` added across every field value: caches append theirs, so the
    /// last is the one nearest the client.
    public static func last(named cache: String, in fieldValues: [String]) -> CacheStatusMember? {
        var found: CacheStatusMember?
        for value in fieldValues {
            for member in members(of: value) where member.cache == cache { found = member }
        }
        return found
    }

    /// The members of one field value; a malformed member is skipped.
    public static func members(of value: String) -> [CacheStatusMember] {
        var members: [CacheStatusMember] = []
        var items: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        func endItem() {
            items.append(current.trimmingSpaces())
            current = ""
        }
        func endMember() {
            endItem()
            if let first = items.first, !first.isEmpty, !first.contains("=") {
                let parameters = items.dropFirst().compactMap { item -> Parameter? in
                    guard !item.isEmpty else { return nil }
                    guard let equals = item.firstIndex(of: "=") else { return Parameter(name: item, value: "") }
                    var value = String(item[item.index(after: equals)...])
                    if value.hasPrefix("\"") { value = unquoted(value) }
                    return Parameter(name: String(item[..<equals]), value: value)
                }
                members.append(CacheStatusMember(cache: first, parameters: parameters))
            }
            items = []
        }
        for character in value {
            if quoted {
                current.append(character)
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted = false
                }
                continue
            }
            switch character {
            case "\"":
                quoted = true
                current.append(character)
            case ";": endItem()
            case ",": endMember()
            default: current.append(character)
            }
        }
        endMember()
        return members
    }

    /// An sf-string's text: the quotes dropped, `\"` and `\\` undone (RFC 8941 §3.3.3).
    private static func unquoted(_ text: String) -> String {
        var result = ""
        var escaped = false
        for character in text.dropFirst() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                break
            } else {
                result.append(character)
            }
        }
        return result
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let end = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(scalars[start...end])
    }
}

import LarderHTTP

/// A client's conditional GET/HEAD evaluated against a response a cache is about to serve
/// (RFC 9110 §13.1, §13.2.2).
public enum Preconditions {
    /// Whether the request carries a precondition a cache can answer (If-None-Match,
    /// If-Modified-Since).
    public static func hasCacheableConditions(_ request: HTTPHeaders) -> Bool {
        request.contains(.ifNoneMatch) || request.contains(.ifModifiedSince)
    }

    /// Preconditions that only the origin can judge for state-changing intent (If-Match,
    /// If-Unmodified-Since): such requests are forwarded, not answered from cache.
    public static func hasOriginConditions(_ request: HTTPHeaders) -> Bool {
        request.contains(.ifMatch) || request.contains(.ifUnmodifiedSince)
    }

    /// True when a 304 Not Modified should be sent instead of the 200 `response`.
    /// If-None-Match uses weak comparison and wins over If-Modified-Since (§13.2.2).
    public static func notModified(request: HTTPHeaders, status: Int, responseHeaders: HTTPHeaders) -> Bool {
        // The validators are read only for a conditional request: most are not.
        guard status == 200, request.contains(.ifNoneMatch) || request.contains(.ifModifiedSince) else { return false }
        return notModified(
            request: request, status: status, etag: responseHeaders[.etag], lastModified: responseHeaders.date(.lastModified))
    }

    /// The same, with the response's validators already read (a stored response keeps them
    /// apart: a hit reads no field).
    public static func notModified(request: HTTPHeaders, status: Int, etag: String?, lastModified: Int?) -> Bool {
        guard status == 200 else { return false }
        if let condition = request.combined("If-None-Match") {
            guard let etag else { return false }
            if ASCII.trimOWS(condition[...]) == "*" { return true }
            return EntityTag.list(condition).contains { EntityTag.weakMatch($0, etag) }
        }
        if let condition = request["If-Modified-Since"], let since = HTTPDate.parse(condition) {
            // §13.1.3: only with a Last-Modified to compare, and not for a date in the future.
            guard let lastModified else { return false }
            return lastModified <= since
        }
        return false
    }

    /// The fields a 304 carries from the 200 it stands for (RFC 9110 §15.4.5).
    public static let notModifiedFields = ["Cache-Control", "Content-Location", "Date", "ETag", "Expires", "Vary", "Last-Modified"]
}

/// Entity tags (RFC 9110 §8.8.3).
public enum EntityTag {
    /// The tags of an If-None-Match / If-Match list.
    public static func list(_ value: String) -> [String] {
        var tags: [String] = []
        var current = ""
        var inQuotes = false
        for character in value {
            if character == "\"" { inQuotes.toggle() }
            if character == "," && !inQuotes {
                let trimmed = ASCII.trimOWS(current[...])
                if !trimmed.isEmpty { tags.append(String(trimmed)) }
                current = ""
            } else {
                current.append(character)
            }
        }
        let trimmed = ASCII.trimOWS(current[...])
        if !trimmed.isEmpty { tags.append(String(trimmed)) }
        return tags
    }

    /// Weak comparison: equal opaque tags, either or both may be weak.
    public static func weakMatch(_ a: String, _ b: String) -> Bool {
        opaque(a) == opaque(b)
    }

    /// Strong comparison: both strong and equal.
    public static func strongMatch(_ a: String, _ b: String) -> Bool {
        !a.hasPrefix("W/") && !b.hasPrefix("W/") && a == b
    }

    static func opaque(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag[...]
    }
}

import LarderHTTP

/// The fields a content-addressed response (a `digest` route's 200) keeps. Its entry is keyed
/// by the digest and shared by every host, and the digest vouches for the body alone: what
/// else the host that filled it said (Set-Cookie, Location, Refresh, Content-Disposition,
/// Link, CORS and HSTS fields, Clear-Site-Data, a Docker-Content-Digest of its own) would
/// otherwise reach the clients of every other host as if their origin had said it. So only
/// fields that describe the bytes are kept, and the document is sandboxed (W3C CSP3 §6.3.2):
/// a body any host can plant under another's URL must not run in that origin.
enum ContentAddressedFields {
    /// Describe the bytes (RFC 9110 §8.3 Content-Type, §8.4 Content-Encoding, §8.8 validators),
    /// or their caching (RFC 9111 §5); Content-Length is Larder's own framing.
    static let kept: Set<String> = [
        "content-type", "content-encoding", "vary", "date", "last-modified", "etag", "cache-control", "expires",
        "accept-ranges",
    ]
    /// What a 304 may update in a stored content-addressed entry (RFC 9111 §4.3.4 would take
    /// every field): its times only, since the body, and so what it is, cannot have changed.
    static let updated: Set<String> = ["date", "cache-control", "expires"]

    /// Keeps the fields that describe the bytes of a body that hashes to `digest`
    /// ("sha256:<hex>"), a Docker-Content-Digest only when it names that digest, and adds the
    /// sandbox.
    static func restrict(_ headers: inout HTTPHeaders, digest: String) {
        headers.removeAll { field in
            let name = field.name.lowercased()
            if name == "docker-content-digest" { return field.value != digest }
            return !kept.contains(name)
        }
        headers.add("Content-Security-Policy", "sandbox")
        headers.add("X-Content-Type-Options", "nosniff")
    }

    /// Keeps what a 304 may update in a stored content-addressed entry.
    static func restrictUpdate(_ headers: inout HTTPHeaders) {
        headers.removeAll { field in !updated.contains(field.name.lowercased()) }
    }
}

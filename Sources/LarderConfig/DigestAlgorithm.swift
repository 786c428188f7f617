/// A route's `digest`: the hash of the body that the URL carries in its `{digest}` capture
/// (Debian's `by-hash/SHA256/<hex>`, OCI's `blobs/sha256:<hex>`). A body that does not hash to
/// it is never stored nor served as a hit, which is what lets such a route key its entries
/// by digest alone, whatever host they came from. MD5 and SHA-1 are not offered: collisions
/// can be made for them, so a URL naming one does not pin its body.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
    case sha256, sha512

    /// The length of the digest in lower-case hex.
    public var hexLength: Int {
        switch self {
        case .sha256: 64
        case .sha512: 128
        }
    }

    /// Whether `text` is a digest of this algorithm as URLs write it: lower-case hex of the
    /// right length (anything else leaves the route to the next one).
    public func accepts(_ text: Substring) -> Bool {
        text.utf8.count == hexLength && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}

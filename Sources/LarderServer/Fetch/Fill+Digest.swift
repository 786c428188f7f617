import LarderCache
import LarderHTTP
import LarderTLS
import LarderUpstream

/// Content addressing (`digest` routes): a body is checked against the digest its URL names
/// before it is stored or completes for any client, since its key, shared by every host,
/// trusts the digest and not the host it came from.
extension Fill {
    /// At the body's end: nil when it hashes to the URL's digest. Otherwise the mismatch is
    /// counted and logged with both digests, and the failure returned is what the readers get:
    /// a 502 while the head is held back, else a transfer that ends short of its framing (the
    /// last byte was never released). While nothing was sent, the readers that attached to
    /// this fill (their URL may name another host: the key is the digest) go on alone instead,
    /// so that one client's host cannot fail another client's request.
    func checkDigest() -> UpstreamError? {
        guard case .pending(let digest) = digestCheck, let expected = options.digest?.expected else { return nil }
        let actual = digest.finish()
        let name = digest.algorithm.rawValue
        if actual == expected {
            digestCheck = .matched
            digestHoldsHead = false
            return nil
        }
        digestCheck = .mismatched
        if digestHoldsHead {
            while buffer.readers.count > 1 { release(at: 1, reason: .notShareable) }
        }
        proxy.telemetry.stats[.digestMismatches].add(1)
        proxy.logger.warning(
            "body does not match the digest its URL names: not stored, not served",
            metadata: [
                "url": "\(proxy.loggable(fetch.request.url.description))", "key": "\(proxy.loggable("\(key)"))",
                "expected": "\(name):\(expected)",
                "received": "\(name):\(actual)",
            ])
        return UpstreamError(
            kind: .digest, message: "the body's \(name) is \(actual), not the \(expected) its URL names",
            afterHead: !digestHoldsHead)
    }
}

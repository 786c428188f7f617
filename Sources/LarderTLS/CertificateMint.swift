import LarderConfig
import LarderIO

/// Mints the certificates intercepted clients are shown: one per host name, signed by the
/// local CA, kept in a bounded cache and minted again once half their validity has passed.
///
/// Every leaf carries the same key, made when the mint is: the key that matters is the CA's,
/// and one leaf key spares a key generation per host. A name the CA may not sign for is refused
/// here too, so a misconfiguration cannot produce a certificate clients would reject anyway.
///
/// State: the cache is behind a lock; the CA and the leaf key are immutable handles.
public final class CertificateMint: Sendable {
    /// A minted certificate and its key.
    public struct Leaf: Sendable {
        let certificate: OpenSSL.Handle
        let key: OpenSSL.Handle
        /// When it was minted (monotonic nanoseconds), for re-minting.
        let minted: UInt64

        /// The certificate as PEM.
        public func certificatePEM() throws(LocalCA.Failure) -> String {
            do {
                return try OpenSSL.pem(of: certificate)
            } catch {
                throw LocalCA.Failure("cannot write a certificate: \(error)")
            }
        }
    }

    /// What the cache did, for metrics.
    public struct Statistics: Sendable, Equatable {
        public var minted = 0
        public var hits = 0

        public init(minted: Int = 0, hits: Int = 0) {
            self.minted = minted
            self.hits = hits
        }
    }

    private struct Cache {
        var leaves: [String: Leaf] = [:]
        var statistics = Statistics()
    }

    private let authority: OpenSSL.Handle
    private let authorityKey: OpenSSL.Handle
    private let leafKey: OpenSSL.Handle
    /// The CA's facts: what it may sign for.
    public let facts: CertificateFacts
    /// The CA certificate, PEM and DER, as clients download it to trust it (never its key).
    public let authorityPEM: String
    public let authorityDER: [UInt8]
    private let validitySeconds: Int
    private let capacity: Int
    private let cache = Locked(Cache())

    /// A mint over the CA in `directory` (checked as ``LocalCA/load(from:)`` checks it).
    public init(directory: String, leafValidity: Duration, capacity: Int = 1024) throws(LocalCA.Failure) {
        let (facts, certificate, key) = try LocalCA.read(from: directory)
        do {
            authority = try OpenSSL.readCertificate(certificate)
            authorityKey = try OpenSSL.readKey(key)
            leafKey = try OpenSSL.makeKey()
            authorityPEM = try OpenSSL.pem(of: authority)
            authorityDER = try OpenSSL.der(of: authority)
        } catch {
            throw LocalCA.Failure("cannot use the CA in \(directory): \(error)")
        }
        self.facts = facts
        validitySeconds = Int(leafValidity.components.seconds)
        self.capacity = max(capacity, 1)
    }

    /// The certificate for `name` (a DNS name, compared case-insensitively): from the cache
    /// while less than half its validity has passed at `now` (monotonic nanoseconds), else
    /// minted. Refused for a name the CA may not sign for, or one that is not a DNS name.
    public func leaf(for name: String, now: UInt64) throws(LocalCA.Failure) -> Leaf {
        let lower = name.lowercased()
        guard let rule = HostRule(parsing: lower), case .host(let host) = rule, rule.isName, host == lower else {
            throw LocalCA.Failure("'\(name)' is not a DNS name")
        }
        guard facts.permits(lower) else { throw LocalCA.Failure("the CA may not sign for '\(name)'") }
        let fresh = UInt64(validitySeconds) * 1_000_000_000 / 2
        if let cached = cache.withLock({ cache -> Leaf? in
            guard let leaf = cache.leaves[lower], now &- leaf.minted < fresh else { return nil }
            cache.statistics.hits += 1
            return leaf
        }) {
            return cached
        }
        // Minted outside the lock: two threads minting one name at once both succeed, and the
        // later one stays cached.
        let certificate: OpenSSL.Handle
        do {
            certificate = try OpenSSL.makeLeaf(
                name: lower, key: leafKey, issuer: authority, issuerKey: authorityKey, seconds: validitySeconds)
        } catch {
            throw LocalCA.Failure("cannot mint a certificate for '\(name)': \(error)")
        }
        let leaf = Leaf(certificate: certificate, key: leafKey, minted: now)
        cache.withLock { cache in
            if cache.leaves[lower] == nil, cache.leaves.count >= capacity,
                let oldest = cache.leaves.min(by: { $0.value.minted < $1.value.minted })?.key
            {
                cache.leaves[oldest] = nil
            }
            cache.leaves[lower] = leaf
            cache.statistics.minted += 1
        }
        return leaf
    }

    public var statistics: Statistics { cache.withLock { $0.statistics } }

    /// Names cached now.
    public var cachedCount: Int { cache.withLock { $0.leaves.count } }
}

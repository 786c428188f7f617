import LarderConfig
import LarderIO

/// What every intercepted session shares: the server settings and the mint that gives each
/// host name its certificate. One per loaded CA; thread-safe.
public final class TLSInterceptor: Sendable {
    let context: OpenSSL.ServerContext
    public let mint: CertificateMint
    /// The leaf validity the mint was made with (a reload that changes it makes a new mint).
    let leafValidity: Duration

    public init(mint: CertificateMint, leafValidity: Duration = .seconds(7 * 86_400)) throws(LocalCA.Failure) {
        self.mint = mint
        self.leafValidity = leafValidity
        do {
            context = try OpenSSL.ServerContext { name in
                guard let leaf = try? mint.leaf(for: name, now: Clocks.monotonicNanos()) else { return nil }
                return (leaf.certificate, leaf.key)
            }
        } catch {
            throw LocalCA.Failure("cannot set up TLS: \(error)")
        }
    }

    /// The interceptor `tls` asks for: nil when `tls.intercept` is empty, else one over the CA
    /// in `tls.ca_dir`, read once and checked as ``LocalCA/problems(with:)`` checks it.
    /// `running` is kept (with its minted certificates) when the CA and the validity are the
    /// same. Throws with every problem, one per line.
    public static func make(for tls: TLSConfig, replacing running: TLSInterceptor?) throws(LocalCA.Failure) -> TLSInterceptor? {
        if !tls.upstreamCAFile.isEmpty { try checkTrustAnchors(tls.upstreamCAFile) }
        guard !tls.intercept.isEmpty else { return nil }
        let mint: CertificateMint
        do {
            mint = try CertificateMint(directory: tls.caDirectory, leafValidity: tls.leafValidity)
        } catch {
            throw LocalCA.Failure("tls.intercept is set, but the CA cannot be used: \(error)")
        }
        let problems = LocalCA.problems(with: tls, facts: mint.facts)
        guard problems.isEmpty else { throw LocalCA.Failure(problems.joined(separator: "\n"), needsNewCA: true) }
        if let running, running.mint.facts.sha256Fingerprint == mint.facts.sha256Fingerprint, running.leafValidity == tls.leafValidity {
            return running
        }
        return try TLSInterceptor(mint: mint, leafValidity: tls.leafValidity)
    }

    /// Checks that `tls.upstream_ca_file` is a readable PEM file with at least one certificate,
    /// so a typo does not surface as every origin failing verification.
    public static func checkTrustAnchors(_ path: String) throws(LocalCA.Failure) {
        let count: Int
        do {
            let text = String(decoding: try FileSystem.readWhole(path, limit: 16 << 20), as: UTF8.self)
            count = try OpenSSL.certificateCount(inPEM: text)
        } catch {
            throw LocalCA.Failure("tls.upstream_ca_file: cannot read \(path): \(error)")
        }
        if count == 0 { throw LocalCA.Failure("tls.upstream_ca_file: \(path) holds no PEM certificate") }
    }
}

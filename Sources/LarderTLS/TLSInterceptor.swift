import LarderIO

/// What every intercepted session shares: the server settings and the mint that gives each
/// host name its certificate. One per process; thread-safe.
public final class TLSInterceptor: Sendable {
    let context: OpenSSL.ServerContext
    public let mint: CertificateMint

    public init(mint: CertificateMint) throws(LocalCA.Failure) {
        self.mint = mint
        do {
            context = try OpenSSL.ServerContext { name in
                guard let leaf = try? mint.leaf(for: name, now: Clocks.monotonicNanos()) else { return nil }
                return (leaf.certificate, leaf.key)
            }
        } catch {
            throw LocalCA.Failure("cannot set up TLS: \(error)")
        }
    }
}

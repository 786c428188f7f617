/// What Larder shows and checks of a certificate (`larder ca show`, `check-config`).
public struct CertificateFacts: Sendable, Equatable {
    /// The subject, RFC 2253 form ("CN=Larder local CA,O=Larder").
    public let subject: String
    /// The end of its validity as OpenSSL prints it ("Nov 23 22:40:01 2036 GMT").
    public let notAfter: String
    /// Seconds until then (negative once expired).
    public let secondsLeft: Int
    /// SHA-256 of the DER certificate, colon-separated upper-case hex, as browsers show it.
    public let sha256Fingerprint: String
    /// The DNS names its Name Constraints permit; nil when it has none (it can sign for any name).
    public let permittedDNS: [String]?
    /// Whether it is a CA certificate (basicConstraints CA:TRUE).
    public let isCA: Bool
    /// The e-mail and URI names its Name Constraints permit (`.invalid` for none that exist);
    /// empty when it does not constrain them (it can sign for any).
    public var permittedEmail: [String] = []
    public var permittedURI: [String] = []
    /// Its extended key usages (RFC 5280 §4.2.1.12); nil without the extension (any use).
    public var extendedKeyUsage: [String]? = nil

    /// Whether a Name-Constrained CA also has what keeps it to TLS servers: extended key usage
    /// serverAuth only, and e-mail and URI names constrained. A CA made before those were added
    /// lacks them, and `larder ca init --rotate` makes one that has them.
    public var lacksServerOnlyLimits: Bool {
        guard permittedDNS != nil else { return false }  // unconstrained on purpose (--unconstrained)
        return extendedKeyUsage != ["serverAuth"] || permittedEmail.isEmpty || permittedURI.isEmpty
    }

    /// Whether the Name Constraints let this CA sign for the DNS name `name`: it is, or is
    /// under, a permitted name (RFC 5280 §4.2.1.10); any name when there are none.
    public func permits(_ name: String) -> Bool {
        guard let permittedDNS else { return true }
        let lower = name.lowercased()
        return permittedDNS.contains { permitted in
            let base = permitted.lowercased()
            return lower == base || lower.hasSuffix("." + base)
        }
    }
}

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

import LarderIO

extension LocalCA {
    /// The CA in `directory`, checked as ``load(from:)`` checks it, with its certificate as
    /// clients are to install it: PEM written afresh from the parsed certificate, so nothing
    /// else `ca.pem` holds (text around the block) reaches a trust store. A `ca.pem` with
    /// another PEM block (a second certificate, a private key) is refused: whoever put it there
    /// meant something other than Larder's CA, and clients would trust or expose all of it.
    public static func trusted(from directory: String) throws(Failure) -> (facts: CertificateFacts, pem: String) {
        let (facts, certificate, _) = try read(from: directory)
        let path = directory + "/" + certificateFile
        let blocks = pemBlockLabels(certificate)
        guard blocks == ["CERTIFICATE"] else {
            let found = blocks.isEmpty ? "no PEM block" : blocks.joined(separator: ", ")
            throw Failure(
                "\(path) must hold the CA certificate alone, one CERTIFICATE block; it holds \(found): keep only the CA's certificate in it"
            )
        }
        do {
            return (facts, try OpenSSL.pem(of: try OpenSSL.readCertificate(certificate)))
        } catch {
            throw Failure("\(path): \(error)")
        }
    }

    /// The label of each `-----BEGIN LABEL-----` line of `text`, in order (RFC 7468 §2).
    static func pemBlockLabels(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { line -> String? in
            let trimmed = String(line).drop(while: { $0 == " " || $0 == "\t" })
            guard trimmed.hasPrefix("-----BEGIN ") else { return nil }
            let label = trimmed.dropFirst("-----BEGIN ".count)
            guard let end = label.firstRange(of: "-----") else { return String(label) }
            return String(label[..<end.lowerBound])
        }
    }
}

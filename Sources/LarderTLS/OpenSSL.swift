import COpenSSL
import Glibc
import LarderConfig

/// Every call into OpenSSL (libcrypto, libssl) is in this file. Values cross it as Swift types
/// and PEM text; OpenSSL objects never leave a function that made them, but for
/// ``sessionHasPendingBytes(_:)``, which reads a session libcurl made.
public enum OpenSSL {
    /// Whether OpenSSL holds bytes of `session` (an `SSL *` libcurl made, from
    /// `CURLINFO_TLS_SSL_PTR`) that its owner has not read: plaintext left over from a record, or
    /// a record read but not processed. A socket's readiness cannot show them.
    public static func sessionHasPendingBytes(_ session: UnsafeMutableRawPointer) -> Bool {
        SSL_has_pending(OpaquePointer(session)) != 0
    }

    /// An OpenSSL call that failed, with the library's own reason when it queued one.
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let reason: String
        var description: String { reason.isEmpty ? "\(call) failed" : "\(call) failed: \(reason)" }

        /// Takes the reasons OpenSSL queued on this thread (and clears the queue).
        init(_ call: String) {
            self.call = call
            var reasons: [String] = []
            while case let code = ERR_get_error(), code != 0 {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(OpenSSL.text(buffer))
            }
            reason = reasons.joined(separator: "; ")
        }
    }

    /// An OpenSSL certificate (X509) or key (EVP_PKEY) that frees itself.
    ///
    /// `@unchecked Sendable`: a thin owner of one C handle. Invariant: the object is complete
    /// when wrapped and never modified afterwards; OpenSSL allows any number of threads to
    /// read (and take references to) an unmodified X509 or EVP_PKEY at once.
    final class Handle: @unchecked Sendable {
        let pointer: OpaquePointer
        private let release: (OpaquePointer) -> Void

        fileprivate init(_ pointer: OpaquePointer, release: @escaping (OpaquePointer) -> Void) {
            self.pointer = pointer
            self.release = release
        }

        deinit { release(pointer) }

        static func certificate(_ pointer: OpaquePointer) -> Handle { Handle(pointer) { X509_free($0) } }
        static func key(_ pointer: OpaquePointer) -> Handle { Handle(pointer) { EVP_PKEY_free($0) } }
    }

    /// A new ECDSA P-256 key.
    static func makeKey() throws(Failure) -> Handle {
        guard let key = larder_ec_p256() else { throw Failure("EVP_EC_gen") }
        return .key(key)
    }

    /// A self-signed CA certificate and its new ECDSA P-256 key, both PEM. `permittedDNS`:
    /// the DNS names its Name Constraints permit (RFC 5280 §4.2.1.10; each also permits the
    /// names under it), with every IP address excluded, so the key can sign for nothing else;
    /// nil for no constraints.
    ///
    /// Every CA, an unconstrained one too, is kept to TLS servers by extended key usage
    /// serverAuth (which OpenSSL, NSS and Windows apply to every certificate below a CA too):
    /// Larder signs nothing else, and a key that may sign any name need not also sign client
    /// certificates for any identity. A constrained CA also permits e-mail and URI names only
    /// under `.invalid` (RFC 6761 §6.4: never a real domain). An excluded subtree cannot name
    /// "every address" (RFC 5280 §4.2.1.10 has no such form, and OpenSSL's matcher treats an
    /// empty one as an empty host), but a permitted one of a type restricts every name of that
    /// type, in the SAN and in the subject's emailAddress alike; a URI without a host fails the
    /// check outright. So the key cannot sign a usable client-auth, S/MIME, URI-SAN or
    /// code-signing certificate.
    static func makeAuthority(commonName: String, permittedDNS: [String]?, validDays: Int) throws(Failure) -> (
        certificate: String, key: String
    ) {
        let key = try makeKey()
        var extensions = [
            (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
            (NID_key_usage, "critical,keyCertSign,cRLSign"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid:always"),
        ]
        if let permittedDNS {
            let permitted = permittedDNS.map { "permitted;DNS:\($0)" } + ["permitted;email:.invalid", "permitted;URI:.invalid"]
            let excluded = ["excluded;IP:0.0.0.0/0.0.0.0", "excluded;IP:::/::"]
            extensions.append((NID_name_constraints, (["critical"] + permitted + excluded).joined(separator: ",")))
        }
        extensions.append((NID_ext_key_usage, "serverAuth"))
        let certificate = try makeCertificate(
            subject: [("O", "Larder"), ("CN", commonName)], publicKey: key, issuer: nil, issuerKey: key,
            seconds: validDays * 86_400, extensions: extensions)
        return (
            try pem(of: certificate),
            try pem("PEM_write_bio_PrivateKey") { PEM_write_bio_PrivateKey($0, key.pointer, nil, nil, 0, nil, nil) }
        )
    }

    /// A server certificate for the DNS name `name` carrying `key`'s public half, signed by
    /// `issuer` with `issuerKey`, valid for `seconds` but never past the issuer.
    static func makeLeaf(name: String, key: Handle, issuer: Handle, issuerKey: Handle, seconds: Int) throws(Failure) -> Handle {
        try makeCertificate(
            subject: [("CN", name)], publicKey: key, issuer: issuer, issuerKey: issuerKey, seconds: seconds,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth"),
                (NID_subject_alt_name, "DNS:\(name)"),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ])
    }

    /// An X.509 v3 certificate: self-signed when `issuer` is nil.
    private static func makeCertificate(
        subject: [(String, String)], publicKey: Handle, issuer: Handle?, issuerKey: Handle, seconds: Int,
        extensions: [(Int32, String)]
    ) throws(Failure) -> Handle {
        guard let made = X509_new() else { throw Failure("X509_new") }
        let certificate = Handle.certificate(made)
        guard X509_set_version(made, 2) == 1 else { throw Failure("X509_set_version") }  // v3
        // RFC 5280 §4.1.2.2: positive, at most 20 octets; 127 random bits.
        guard let serial = BN_new() else { throw Failure("BN_new") }
        defer { BN_free(serial) }
        guard BN_rand(serial, 127, -1, 0) == 1, BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(made)) != nil else {
            throw Failure("BN_rand")
        }
        // An hour back, for clients whose clocks run behind.
        guard X509_gmtime_adj(X509_getm_notBefore(made), -3600) != nil, X509_gmtime_adj(X509_getm_notAfter(made), seconds) != nil
        else { throw Failure("X509_gmtime_adj") }
        if let issuer, ASN1_TIME_compare(X509_get0_notAfter(made), X509_get0_notAfter(issuer.pointer)) > 0 {
            guard X509_set1_notAfter(made, X509_get0_notAfter(issuer.pointer)) == 1 else { throw Failure("X509_set1_notAfter") }
        }
        let name = X509_get_subject_name(made)
        for (field, value) in subject {
            guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else {
                throw Failure("X509_NAME_add_entry_by_txt")
            }
        }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? name
        guard X509_set_issuer_name(made, issuerName) == 1, X509_set_pubkey(made, publicKey.pointer) == 1 else {
            throw Failure("X509_set_pubkey")
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.pointer ?? made, made, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_nconf_nid(nil, &context, nid, value) else { throw Failure("X509V3_EXT_nconf_nid(\(value))") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(made, ext, -1) == 1 else { throw Failure("X509_add_ext") }
        }
        guard X509_sign(made, issuerKey.pointer, EVP_sha256()) > 0 else { throw Failure("X509_sign") }
        return certificate
    }

    /// A certificate as PEM.
    static func pem(of certificate: Handle) throws(Failure) -> String {
        try pem("PEM_write_bio_X509") { PEM_write_bio_X509($0, certificate.pointer) }
    }

    /// A certificate in DER (its ASN.1 bytes, RFC 5280 §4.1), as `.der`/`.crt` downloads carry it.
    static func der(of certificate: Handle) throws(Failure) -> [UInt8] {
        let length = i2d_X509(certificate.pointer, nil)
        guard length > 0 else { throw Failure("i2d_X509") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate.pointer, &cursor)
        }
        guard written == length else { throw Failure("i2d_X509") }
        return bytes
    }

    /// A PEM certificate or private key, read.
    /// How many certificates the PEM text holds (other blocks are skipped).
    static func certificateCount(inPEM text: String) throws(Failure) -> Int {
        let bio = try memoryBIO(holding: text)
        defer { BIO_free(bio) }
        var count = 0
        while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
            X509_free(certificate)
            count += 1
        }
        ERR_clear_error()  // the end of the text is queued as an error
        return count
    }

    static func readCertificate(_ text: String) throws(Failure) -> Handle { .certificate(try readCertificatePointer(text)) }
    static func readKey(_ text: String) throws(Failure) -> Handle { .key(try readKeyPointer(text)) }

    /// What ``LocalCA`` shows of a certificate.
    static func facts(ofCertificatePEM text: String) throws(Failure) -> CertificateFacts {
        try facts(of: try readCertificate(text))
    }

    /// What ``LocalCA`` shows of a certificate.
    static func facts(of handle: Handle) throws(Failure) -> CertificateFacts {
        let certificate = handle.pointer
        let subject = try pem("X509_NAME_print_ex") { bio in
            X509_NAME_print_ex(bio, X509_get_subject_name(certificate), 0, larder_name_flags_rfc2253()) >= 0 ? 1 : 0
        }
        let notAfter = try pem("ASN1_TIME_print") { ASN1_TIME_print($0, X509_get0_notAfter(certificate)) }
        var secondsLeft: Int32 = 0
        var daysLeft: Int32 = 0
        guard ASN1_TIME_diff(&daysLeft, &secondsLeft, nil, X509_get0_notAfter(certificate)) == 1 else {
            throw Failure("ASN1_TIME_diff")
        }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else { throw Failure("X509_digest") }
        let fingerprint = digest.prefix(Int(length)).map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
        let usages = X509_get_extended_key_usage(certificate)
        return CertificateFacts(
            subject: subject, notAfter: notAfter, secondsLeft: Int(daysLeft) * 86_400 + Int(secondsLeft),
            sha256Fingerprint: fingerprint, permittedDNS: try permitted(larder_gen_dns(), in: certificate),
            isCA: X509_check_ca(certificate) != 0, permittedEmail: try permitted(larder_gen_email(), in: certificate) ?? [],
            permittedURI: try permitted(larder_gen_uri(), in: certificate) ?? [],
            extendedKeyUsage: usages == UInt32.max ? nil : keyUsageNames(usages))
    }

    /// The names of `type` a certificate's Name Constraints permit; nil when it has none.
    private static func permitted(_ type: Int32, in certificate: OpaquePointer) throws(Failure) -> [String]? {
        var names: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        for index in 0..<1024 {
            let count = larder_permitted_name(certificate, type, Int32(index), &buffer, Int32(buffer.count))
            if count == -2 { return nil }
            if count == -3 { throw Failure("a Name Constraints name over 255 bytes") }
            guard count >= 0 else { break }
            names.append(OpenSSL.text(buffer))
        }
        return names
    }

    /// The extended key usages in OpenSSL's `XKU_*` bits, by their RFC 5280 §4.2.1.12 names.
    private static func keyUsageNames(_ bits: UInt32) -> [String] {
        let names: [(UInt32, String)] = [
            (UInt32(XKU_SSL_SERVER), "serverAuth"), (UInt32(XKU_SSL_CLIENT), "clientAuth"), (UInt32(XKU_SMIME), "emailProtection"),
            (UInt32(XKU_CODE_SIGN), "codeSigning"), (UInt32(XKU_OCSP_SIGN), "OCSPSigning"), (UInt32(XKU_TIMESTAMP), "timeStamping"),
            (UInt32(XKU_ANYEKU), "anyExtendedKeyUsage"),
        ]
        return names.filter { bits & $0.0 != 0 }.map(\.1)
    }

    /// Whether the PEM private key `keyPEM` is the key of the PEM certificate `certificatePEM`.
    static func key(_ keyPEM: String, matches certificatePEM: String) throws(Failure) -> Bool {
        let certificate = try readCertificate(certificatePEM)
        let key = try readKey(keyPEM)
        // A handle frees its object once unused: keep both until the call returns.
        return withExtendedLifetime((certificate, key)) { X509_check_private_key(certificate.pointer, key.pointer) == 1 }
    }

    // MARK: TLS sessions

    /// The server side of every intercepted session: TLS 1.2 at least, no renegotiation,
    /// ALPN `http/1.1` only, and the certificate for the client's SNI name from `leaf`.
    ///
    /// `@unchecked Sendable`: a thin owner of one SSL_CTX. Invariant: configured in `init`
    /// and afterwards only passed to SSL_new, which OpenSSL allows from any thread.
    final class ServerContext: @unchecked Sendable {
        let pointer: OpaquePointer
        /// The certificate and key for an SNI name; nil refuses the handshake.
        let leaf: @Sendable (String) -> (certificate: Handle, key: Handle)?

        init(leaf: @escaping @Sendable (String) -> (certificate: Handle, key: Handle)?) throws(Failure) {
            guard let context = SSL_CTX_new(TLS_server_method()) else { throw Failure("SSL_CTX_new") }
            pointer = context
            self.leaf = leaf
            guard larder_configure_server(context) == 1 else { throw Failure("SSL_CTX_set_min_proto_version") }
            SSL_CTX_set_alpn_select_cb(context, selectHTTP11, nil)
            larder_set_servername_callback(context, chooseCertificate, Unmanaged.passUnretained(self).toOpaque())
        }

        deinit { SSL_CTX_free(pointer) }
    }

    /// One TLS session, server side, over a non-blocking socket.
    ///
    /// `@unchecked Sendable`: a thin owner of one SSL handle. Invariant: one event loop uses it
    /// at a time; it changes loops only inside ``TLSTransport/Handoff``, passed through the
    /// loop's task queue (whose lock orders the last use on one loop before the first on the
    /// next), and OpenSSL ties no SSL object to a thread.
    final class Session: @unchecked Sendable {
        let ssl: OpaquePointer
        /// The name the client must ask for (the CONNECT target): another SNI is refused.
        let expectedName: String
        /// The SNI name the client sent.
        fileprivate(set) var serverName: String?
        /// Why the handshake was refused, when Larder refused it.
        fileprivate(set) var refusal: String?
        /// The last failure was an alert from the peer (it refused our certificate, say).
        private(set) var peerAlerted = false
        /// The last failure was the peer closing the connection mid-way, without an alert.
        private(set) var peerVanished = false
        /// Larder's Certificate message went out: the client has been shown the certificate,
        /// so an alert or a close from now on can be its verdict on it.
        fileprivate(set) var certificateSent = false
        /// Kept alive as long as the session: the SNI callback reaches it through the SSL.
        private let context: ServerContext

        init(context: ServerContext, fd: Int32, expectedName: String) throws(Failure) {
            guard let ssl = SSL_new(context.pointer) else { throw Failure("SSL_new") }
            self.ssl = ssl
            self.context = context
            self.expectedName = expectedName
            guard SSL_set_fd(ssl, fd) == 1 else { throw Failure("SSL_set_fd") }
            SSL_set_accept_state(ssl)
            // Slot 0 is the "app data" slot (SSL_set_app_data is a macro over it).
            SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
            // Watches the handshake messages sent, until the handshake is over.
            SSL_set_msg_callback(ssl, watchHandshake)
        }

        deinit { SSL_free(ssl) }

        /// What a call on the session came to.
        enum Outcome: Equatable {
            case done(Int)
            /// Nothing until the socket is readable (or writable) again.
            case wantRead, wantWrite
            /// The peer closed the session cleanly.
            case closed
            case failed(String)
        }

        func handshake() -> Outcome {
            let result = outcome(of: "SSL_do_handshake", SSL_do_handshake(ssl), count: 0)
            // Records after the handshake need no watching: no callback per record.
            if case .done = result { SSL_set_msg_callback(ssl, nil) }
            return result
        }

        func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
            var count = 0
            return outcome(of: "SSL_read", SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count), count: count)
        }

        func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
            var count = 0
            return outcome(of: "SSL_write", SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &count), count: count)
        }

        /// Sends `count` bytes of `fd` from `offset` through the kernel's TLS (only once
        /// ``kernelSends``): the bytes never enter user space.
        func sendFile(_ fd: Int32, offset: Int64, count: Int) -> Outcome {
            let result = SSL_sendfile(ssl, fd, off_t(offset), count, 0)
            if result >= 0 { return .done(result) }
            return outcome(of: "SSL_sendfile", -1, count: 0)
        }

        /// Whether the kernel encrypts what this session sends (kTLS): the handshake is over and
        /// the kernel took the keys.
        var kernelSends: Bool { larder_ktls_send(ssl) == 1 }

        /// Whether bytes are buffered in the session, decrypted or not (with read-ahead a
        /// whole record can wait there, and the socket will not say so).
        var hasPending: Bool { SSL_has_pending(ssl) == 1 }
        /// The negotiated protocol version ("TLSv1.3").
        var version: String { String(cString: SSL_get_version(ssl)) }

        /// Sends close_notify (once; a full socket just skips it).
        func shutdown() { _ = SSL_shutdown(ssl) }

        private func outcome(of call: String, _ result: Int32, count: Int) -> Outcome {
            if result == 1 { return .done(count) }
            let code = SSL_get_error(ssl, result)
            switch code {
            case SSL_ERROR_WANT_READ: return .wantRead
            case SSL_ERROR_WANT_WRITE: return .wantWrite
            case SSL_ERROR_ZERO_RETURN: return .closed
            default:
                let first = ERR_peek_error()
                peerAlerted = larder_error_is_alert(first) != 0
                let queued = Failure(call)
                peerVanished =
                    larder_error_is_eof(first) != 0
                    || (code == SSL_ERROR_SYSCALL && queued.reason.isEmpty && (errno == 0 || errno == ECONNRESET))
                let errnoText = code == SSL_ERROR_SYSCALL && errno != 0 ? String(cString: strerror(errno)) : ""
                let reason = [refusal, queued.reason, errnoText].compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: "; ")
                return .failed(reason.isEmpty ? "\(call): the peer closed the connection" : "\(call): \(reason)")
            }
        }
    }

    // MARK: Helpers

    /// A NUL-terminated C string in `buffer`, as text.
    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func readCertificatePointer(_ text: String) throws(Failure) -> OpaquePointer {
        let bio = try memoryBIO(holding: text)
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else { throw Failure("PEM_read_bio_X509") }
        return certificate
    }

    private static func readKeyPointer(_ text: String) throws(Failure) -> OpaquePointer {
        let bio = try memoryBIO(holding: text)
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw Failure("PEM_read_bio_PrivateKey") }
        return key
    }

    private static func memoryBIO(holding text: String) throws(Failure) -> OpaquePointer {
        let bytes = Array(text.utf8)
        // BIO_new_mem_buf does not copy: a fresh BIO written to does.
        guard let bio = BIO_new(BIO_s_mem()) else { throw Failure("BIO_new") }
        guard bytes.isEmpty || BIO_write(bio, bytes, Int32(bytes.count)) == Int32(bytes.count) else {
            BIO_free(bio)
            throw Failure("BIO_write")
        }
        return bio
    }

    /// Runs `write` into a memory BIO and returns what it wrote, as text; `write` returns
    /// OpenSSL's 1 for success.
    private static func pem(_ call: String, _ write: (OpaquePointer) -> Int32) throws(Failure) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw Failure("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) > 0 else { throw Failure(call) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while case let count = BIO_read(bio, &chunk, Int32(chunk.count)), count > 0 {
            bytes += chunk.prefix(Int(count))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// ALPN (RFC 7301): `http/1.1` if the client offers it, else the handshake fails with
/// no_application_protocol; a client that offers none gets HTTP/1.1 too.
private func selectHTTP11(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    let wanted = Array("http/1.1".utf8)
    guard let offered else { return 3 }  // SSL_TLSEXT_ERR_NOACK
    var index = 0
    while index < Int(offeredLength) {
        let length = Int(offered[index])
        let start = index + 1
        if start + length <= Int(offeredLength), length == wanted.count,
            (0..<length).allSatisfy({ offered[start + $0] == wanted[$0] })
        {
            out?.pointee = offered + start
            outLength?.pointee = UInt8(length)
            return 0  // SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return 2  // SSL_TLSEXT_ERR_ALERT_FATAL: no_application_protocol
}

/// Notes when the server's Certificate message (handshake type 11, RFC 8446 §4.4.2; RFC 5246
/// §7.4.2) is written: OpenSSL reports each whole handshake message it sends, with its header.
private func watchHandshake(
    _ writing: Int32, _ version: Int32, _ contentType: Int32, _ bytes: UnsafeRawPointer?, _ length: Int, _ ssl: OpaquePointer?,
    _ argument: UnsafeMutableRawPointer?
) {
    let handshake: Int32 = 22  // ContentType handshake
    let certificate: UInt8 = 11
    guard writing == 1, contentType == handshake, length > 0, let bytes, bytes.load(as: UInt8.self) == certificate,
        let ssl, let slot = SSL_get_ex_data(ssl, 0)
    else { return }
    Unmanaged<OpenSSL.Session>.fromOpaque(slot).takeUnretainedValue().certificateSent = true
}

/// SNI: the leaf for the name the client asks for, if it is the session's expected name.
private func chooseCertificate(_ ssl: OpaquePointer?, _ alert: UnsafeMutablePointer<Int32>?, _ argument: UnsafeMutableRawPointer?) -> Int32
{
    let unrecognizedName: Int32 = 112  // RFC 6066 §3 unrecognized_name
    guard let ssl, let argument, let slot = SSL_get_ex_data(ssl, 0) else { return 2 }
    let context = Unmanaged<OpenSSL.ServerContext>.fromOpaque(argument).takeUnretainedValue()
    let session = Unmanaged<OpenSSL.Session>.fromOpaque(slot).takeUnretainedValue()
    guard let raw = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else {
        session.refusal = "the client sent no server name (SNI)"
        alert?.pointee = unrecognizedName
        return 2  // SSL_TLSEXT_ERR_ALERT_FATAL
    }
    let name = String(cString: raw)
    session.serverName = name
    guard name.lowercased() == session.expectedName.lowercased() else {
        session.refusal = "the client asked for \(name), not \(session.expectedName) it sent CONNECT for"
        alert?.pointee = unrecognizedName
        return 2
    }
    guard let leaf = context.leaf(name), SSL_use_certificate(ssl, leaf.certificate.pointer) == 1,
        SSL_use_PrivateKey(ssl, leaf.key.pointer) == 1
    else {
        session.refusal = "no certificate for \(name)"
        alert?.pointee = unrecognizedName
        return 2
    }
    return 0
}

/// A body hashed as it streams in (SHA-256 or SHA-512 through OpenSSL's EVP digests), to be
/// compared with the digest its URL names (a route's `digest`).
///
/// Not Sendable: owned by the one fill that feeds it, on that fill's loop.
public final class BodyDigest {
    public let algorithm: DigestAlgorithm
    private let context: OpaquePointer

    public init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        // Allocation failure is the only way either call fails for these built-in digests.
        guard let context = EVP_MD_CTX_new(),
            EVP_DigestInit_ex(context, algorithm == .sha256 ? EVP_sha256() : EVP_sha512(), nil) == 1
        else { fatalError("\(OpenSSL.Failure("EVP_DigestInit_ex"))") }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds the next bytes of the body.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest of every byte added, in lower-case hex; the object is spent afterwards.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(Int(length) * 2)
        for byte in digest[..<Int(length)] {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

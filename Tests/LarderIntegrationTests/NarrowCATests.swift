import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// The CA is kept to TLS servers (issue 57): its key, if it leaked, cannot sign a client,
    /// e-mail (S/MIME), URI-SAN or code-signing certificate that OpenSSL accepts, while the
    /// server leaves Larder mints still verify. Checked with the openssl command line.
    @Suite(.timeLimit(.minutes(3))) struct NarrowCA {
        /// Extensions for certificates signed with the CA key, one section per use.
        static let uses = """
            [server]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:localhost
            [client]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=clientAuth
            subjectAltName=DNS:localhost
            [smime]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature,keyEncipherment
            extendedKeyUsage=emailProtection
            subjectAltName=email:boss@example.com
            [smimesubject]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature,keyEncipherment
            extendedKeyUsage=emailProtection
            [eai]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:localhost,otherName:1.3.6.1.5.5.7.8.9;UTF8:boss@example.com
            [uri]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:localhost,URI:https://bank.example/login
            [code]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=codeSigning
            subjectAltName=DNS:localhost
            [old]
            basicConstraints=critical,CA:TRUE,pathlen:0
            keyUsage=critical,keyCertSign,cRLSign
            nameConstraints=critical,permitted;DNS:localhost,excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::
            subjectKeyIdentifier=hash

            """

        private func run(_ command: String, in directory: String) throws -> (status: Int32, out: String) {
            let child = try ChildProcess("/bin/sh", ["-c", "cd \"$0\" && \(command) 2>&1", directory])
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout)
        }

        private func larder(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let child = try ChildProcess(Paths.larder, arguments)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        /// A certificate for `use` (a section of ``uses``) signed with the CA key in `directory`.
        private func sign(_ use: String, subject: String = "/CN=localhost", in directory: String) throws -> String {
            let made = try run(
                "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(use).key -subj '\(subject)' -out \(use).csr"
                    + " && openssl x509 -req -in \(use).csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1"
                    + " -extfile uses.cnf -extensions \(use) -out \(use).pem", in: directory)
            #expect(made.status == 0, "\(use): \(made.out)")
            return use + ".pem"
        }

        private func verify(_ file: String, purpose: String, in directory: String) throws -> (ok: Bool, out: String) {
            let result = try run("openssl verify -purpose \(purpose) -CAfile ca.pem \(file)", in: directory)
            return (result.status == 0, result.out)
        }

        private func makeCA(in directory: String) throws -> String {
            let config = directory + "/larder.toml"
            try "[tls]\nintercept = [\"localhost\"]\nca_dir = \"\(directory)/ca\"\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            let made = try larder(["ca", "init", "--config", config])
            #expect(made.status == 0, "\(made.err)")
            try Self.uses.write(toFile: directory + "/ca/uses.cnf", atomically: true, encoding: .utf8)
            return config
        }

        @Test func theCAKeyCannotSignClientEmailURIOrCodeSigningCertificatesButServerLeavesVerify() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = try makeCA(in: directory)
            let ca = directory + "/ca"

            let server = try verify(try sign("server", in: ca), purpose: "sslserver", in: ca)
            #expect(server.ok, "a server leaf verifies: \(server.out)")
            let client = try verify(try sign("client", in: ca), purpose: "sslclient", in: ca)
            #expect(!client.ok && client.out.contains("unsuitable certificate purpose"), "client auth: \(client.out)")
            let smime = try sign("smime", in: ca)
            for purpose in ["smimesign", "smimeencrypt", "any"] {
                let checked = try verify(smime, purpose: purpose, in: ca)
                #expect(!checked.ok, "S/MIME (\(purpose)): \(checked.out)")
            }
            // An address in the subject alone is checked against the e-mail constraints too.
            let inSubject = try verify(
                try sign("smimesubject", subject: "/CN=boss/emailAddress=boss@example.com", in: ca), purpose: "any", in: ca)
            #expect(!inSubject.ok && inSubject.out.contains("subtree violation"), "\(inSubject.out)")
            // An internationalized address (SmtpUTF8Mailbox, RFC 8398) is an e-mail name too.
            let eai = try verify(try sign("eai", in: ca), purpose: "any", in: ca)
            #expect(!eai.ok && eai.out.contains("permitted subtree violation"), "\(eai.out)")
            for purpose in ["sslserver", "any"] {
                let uri = try verify(try sign("uri", in: ca), purpose: purpose, in: ca)
                #expect(!uri.ok && uri.out.contains("permitted subtree violation"), "URI SAN (\(purpose)): \(uri.out)")
            }
            // OpenSSL 3.0 has no code-signing purpose to verify against; the CA's extended key
            // usage, which verifiers (Windows, OpenSSL's purposes) apply to every certificate
            // below it, names serverAuth alone.
            _ = try sign("code", in: ca)
            let usage = try run("openssl x509 -in ca.pem -noout -ext extendedKeyUsage,nameConstraints", in: ca)
            #expect(usage.out.contains("TLS Web Server Authentication") && !usage.out.contains("Code Signing"), "\(usage.out)")
            #expect(usage.out.contains("email:.invalid") && usage.out.contains("URI:.invalid"), "\(usage.out)")

            let shown = try larder(["ca", "show", "--config", config])
            #expect(shown.status == 0 && shown.out.contains("key usage:    serverAuth"), "\(shown.out)")
            #expect(shown.out.contains("e-mail names: none (only under .invalid)") && shown.out.contains("URI names:    none"))
            #expect(!shown.out.contains("--rotate"), "a new CA needs no rotation: \(shown.out)")
        }

        /// `--unconstrained` drops the Name Constraints only: its key, which may sign any name,
        /// used to sign client certificates for any identity too.
        @Test func anUnconstrainedCAKeyStillCannotSignAClientCertificate() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let ca = directory + "/ca"
            let made = try larder(["ca", "init", "--dir", ca, "--unconstrained"])
            #expect(made.status == 0, "\(made.err)")
            try Self.uses.write(toFile: ca + "/uses.cnf", atomically: true, encoding: .utf8)
            let server = try verify(try sign("server", in: ca), purpose: "sslserver", in: ca)
            #expect(server.ok, "a server leaf verifies: \(server.out)")
            let client = try verify(try sign("client", in: ca), purpose: "sslclient", in: ca)
            #expect(!client.ok && client.out.contains("unsuitable certificate purpose"), "client auth: \(client.out)")
            let shown = try larder(["ca", "show", "--dir", ca])
            #expect(shown.out.contains("key usage:    serverAuth") && !shown.out.contains("lacks"), "\(shown.out)")
        }

        /// An expired CA: serve and check-config refuse it, and ca show, which prints how to
        /// trust it, says first that it has to be replaced (review 124).
        @Test func anExpiredCAIsToldToBeReplacedBeforeHowToTrustIt() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = try makeCA(in: directory)
            let ca = directory + "/ca"
            // Dates in the past: only `openssl ca` sets them.
            let authority = """
                [ca]
                default_ca = old
                [old]
                database = index.txt
                serial = serial
                new_certs_dir = .
                default_md = sha256
                policy = any
                [any]
                commonName = supplied
                [limits]
                basicConstraints=critical,CA:TRUE,pathlen:0
                keyUsage=critical,keyCertSign,cRLSign
                extendedKeyUsage=serverAuth
                nameConstraints=critical,permitted;DNS:localhost,excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::

                """
            try authority.write(toFile: ca + "/authority.cnf", atomically: true, encoding: .utf8)
            let old = try run(
                ": > index.txt && echo 01 > serial && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
                    + " -keyout ca.key -subj '/CN=Larder local CA' -out ca.csr && openssl ca -batch -selfsign -config authority.cnf"
                    + " -keyfile ca.key -in ca.csr -out ca.pem -startdate 20200101000000Z -enddate 20200102000000Z"
                    + " -extensions limits -notext && chmod 600 ca.key", in: ca)
            #expect(old.status == 0, "\(old.out)")
            let shown = try larder(["ca", "show", "--config", config])
            #expect(
                shown.out.contains("warning: the CA expired")
                    && shown.out.contains("replace it (larder ca init --config \(config) --rotate"),
                "\(shown.out)")
            let checked = try larder(["check-config", config])
            #expect(checked.status == 1 && checked.err.contains("expired"), "\(checked.err)")
        }

        @Test func aCAWithoutTheLimitsIsReportedByShowAndServeAndRotateUpgradesIt() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = try makeCA(in: directory)
            let ca = directory + "/ca"
            // A CA as made before: DNS and IP constraints only, no extended key usage.
            let old = try run(
                "openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem"
                    + " -subj '/O=Larder/CN=Larder local CA' -days 30 -config uses.cnf -extensions old && chmod 600 ca.key", in: ca)
            #expect(old.status == 0, "\(old.out)")
            let client = try verify(try sign("client", in: ca), purpose: "sslclient", in: ca)
            #expect(client.ok, "the old CA's key signs client certificates: \(client.out)")

            let shown = try larder(["ca", "show", "--config", config])
            #expect(shown.out.contains("key usage:    any") && shown.out.contains("e-mail names: any"), "\(shown.out)")
            #expect(
                shown.out.contains("lacks extended key usage serverAuth")
                    && shown.out.contains("larder ca init --config \(config) --rotate"),
                "\(shown.out)")
            // check-config, which takes it as serve does, says so too (review 124).
            let checked = try larder(["check-config", config])
            #expect(checked.status == 0 && checked.err.contains("warning: the CA lacks extended key usage serverAuth"), "\(checked.err)")
            let serve = try Larder(config: try String(contentsOfFile: config, encoding: .utf8))
            try serve.child.waitForOutput { $0.contains("the CA lacks extended key usage serverAuth") }
            serve.stop()

            let rotated = try larder(["ca", "init", "--rotate", "--config", config])
            #expect(rotated.status == 0 && rotated.out.contains("key usage:    serverAuth"), "\(rotated.out) \(rotated.err)")
            let after = try larder(["ca", "show", "--config", config])
            #expect(!after.out.contains("lacks"), "\(after.out)")
            let refused = try verify(try sign("client", in: ca), purpose: "sslclient", in: ca)
            #expect(!refused.ok, "the new key cannot: \(refused.out)")
        }
    }
}

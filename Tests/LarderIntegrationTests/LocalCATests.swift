import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// `larder ca init|show` and what the CA it makes can and cannot sign, checked with the
    /// openssl command line: the files, their modes, no silent overwrite, and Name Constraints
    /// that make a leaf for an unlisted host fail verification.
    @Suite(.timeLimit(.minutes(3))) struct LocalCA {
        /// Runs `larder ARGUMENTS` to the end: status, stdout, stderr.
        private func larder(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let child = try ChildProcess(Paths.larder, arguments)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        private func openssl(_ arguments: [String], in directory: String) throws -> (status: Int32, out: String) {
            let child = try ChildProcess("/bin/sh", ["-c", "cd \"$0\" && exec openssl \"$@\" 2>&1", directory] + arguments)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout)
        }

        /// A leaf for `name` signed by the CA in `directory` with openssl itself (Larder mints
        /// its own leaves for intercepted hosts; this checks what the CA permits any signer).
        private func signLeaf(_ name: String, alternative: String? = nil, in directory: String) throws -> String {
            let file = "leaf-\(name)-\(alternative ?? "").pem"
            let make = try openssl(
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key",
                    "-subj", "/CN=\(name)", "-addext", "subjectAltName=\(alternative ?? "DNS:\(name)")", "-CA", "ca.pem", "-CAkey",
                    "ca.key",
                    "-days", "1", "-out", file,
                ], in: directory)
            #expect(make.status == 0, "\(make.out)")
            return file
        }

        @Test func initMakesAConstrainedCAThatCannotSignForOtherHosts() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[tls]\nintercept = [\"registry.example.org\", \"*.files.example.net\"]\nca_dir = \"\(directory)/ca\"\n"
                .write(toFile: config, atomically: true, encoding: .utf8)

            let made = try larder(["ca", "init", "--config", config])
            #expect(made.status == 0, "\(made.err)")
            #expect(made.out.contains("permits:      registry.example.org, files.example.net"), "\(made.out)")
            var info = stat()
            #expect(stat(directory + "/ca/ca.key", &info) == 0 && info.st_mode & 0o777 == 0o600, "the key is its owner's only")
            #expect(stat(directory + "/ca/ca.pem", &info) == 0 && info.st_mode & 0o777 == 0o644)

            let text = try openssl(["x509", "-in", "ca.pem", "-noout", "-text"], in: directory + "/ca")
            #expect(text.out.contains("X509v3 Name Constraints: critical"), "\(text.out)")
            #expect(text.out.contains("DNS:registry.example.org") && text.out.contains("DNS:files.example.net"))
            #expect(text.out.contains("CA:TRUE"))

            let ca = directory + "/ca"
            for listed in ["registry.example.org", "a.files.example.net"] {
                let verified = try openssl(["verify", "-CAfile", "ca.pem", try signLeaf(listed, in: ca)], in: ca)
                #expect(verified.status == 0, "\(listed): \(verified.out)")
            }
            for outside in ["example.com", "registry.example.org.evil.test", "files.example.network"] {
                let refused = try openssl(["verify", "-CAfile", "ca.pem", try signLeaf(outside, in: ca)], in: ca)
                #expect(refused.status != 0, "\(outside) must fail against the constrained CA")
                #expect(refused.out.contains("permitted subtree violation"), "\(refused.out)")
            }
            // No address either, even beside a listed name.
            let address = try signLeaf("registry.example.org", alternative: "DNS:registry.example.org,IP:127.0.0.1", in: ca)
            let refused = try openssl(["verify", "-CAfile", "ca.pem", address], in: ca)
            #expect(refused.status != 0 && refused.out.contains("excluded subtree violation"), "\(refused.out)")
        }

        @Test func initNeverOverwritesWithoutRotateAndRotateReplacesBoth() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[tls]\nintercept = [\"a.example\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let ca = directory + "/ca"
            #expect(try larder(["ca", "init", "--config", config, "--dir", ca]).status == 0)
            let first = try String(contentsOfFile: ca + "/ca.pem", encoding: .utf8)

            let again = try larder(["ca", "init", "--config", config, "--dir", ca])
            #expect(again.status == 1)
            #expect(again.err.contains("exists; pass --rotate"), "\(again.err)")
            #expect(try String(contentsOfFile: ca + "/ca.pem", encoding: .utf8) == first, "nothing lost")

            try "[tls]\nintercept = [\"a.example\", \"b.example\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let shown = try larder(["ca", "show", "--config", config, "--dir", ca])
            #expect(shown.status == 0)
            #expect(
                shown.out.contains("b.example, which this CA may not sign for: replace it (larder ca init --config \(config) --rotate;"),
                "\(shown.out)")

            let rotated = try larder(["ca", "init", "--config", config, "--dir", ca, "--rotate"])
            #expect(rotated.status == 0, "\(rotated.err)")
            #expect(try String(contentsOfFile: ca + "/ca.pem", encoding: .utf8) != first)
            let after = try larder(["ca", "show", "--config", config, "--dir", ca])
            #expect(after.out.contains("permits:      a.example, b.example") && !after.out.contains("may not sign"), "\(after.out)")
            #expect(try openssl(["verify", "-CAfile", "ca.pem", try signLeaf("b.example", in: ca)], in: ca).status == 0)
        }

        @Test func showPrintsTheFactsAndHowToTrustItAndRefusesAnExposedKey() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let ca = directory + "/ca"
            let none = try larder(["ca", "init", "--dir", ca])
            #expect(none.status == 1 && none.err.contains("lists no host"), "no hosts, no constrained CA: \(none.err)")
            let unconstrained = try larder(["ca", "init", "--dir", ca, "--unconstrained"])
            #expect(unconstrained.status == 0 && unconstrained.err.contains("warning: an unconstrained CA"))

            let shown = try larder(["ca", "show", "--dir", ca])
            #expect(shown.status == 0, "\(shown.err)")
            #expect(shown.out.contains("subject:      CN=Larder local CA,O=Larder"), "\(shown.out)")
            #expect(shown.out.contains("permits:      none (it can sign for any name)"))
            #expect(
                shown.out.contains("expires:") && (shown.out.contains("in 3649 days") || shown.out.contains("in 3650 days")), "\(shown.out)"
            )
            let fingerprint = try openssl(["x509", "-in", "ca.pem", "-noout", "-fingerprint", "-sha256"], in: ca)
            let expected = fingerprint.out.split(separator: "=").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
            #expect(shown.out.contains("sha256:       \(expected)"), "\(shown.out) vs \(fingerprint.out)")
            for client in [
                "update-ca-certificates", "update-ca-trust", "PIP_CERT", "NODE_EXTRA_CA_CERTS=\(ca)/ca.pem",
                "Acquire::https::HOST::CaInfo", "/etc/docker/certs.d/", "CURL_CA_BUNDLE",
            ] {
                #expect(shown.out.contains(client), "trust instructions name \(client)")
            }

            #expect(chmod(ca + "/ca.key", 0o640) == 0)
            let exposed = try larder(["ca", "show", "--dir", ca])
            #expect(exposed.status == 1 && exposed.err.contains("readable by others (mode 640); chmod 600 it"), "\(exposed.err)")
        }

        @Test func checkConfigAndServeRefuseAnExposedOrTooNarrowCA() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            let ca = directory + "/ca"
            try "[tls]\nintercept = [\"a.example\"]\nca_dir = \"\(ca)\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            let serve = [
                "serve", "--config", config, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--cache-dir",
                directory + "/cache",
            ]

            // No CA at all is no error: serve makes it (ContainerTests).
            let missing = try larder(["check-config", config])
            #expect(missing.status == 0 && missing.out.contains("\(ca) holds no CA: serve makes it at start"), "\(missing.out)")
            #expect(missing.out.contains("(or larder ca init --config \(config) now)"), "\(missing.out)")
            let unitMissing = try larder(["check-config", "--state-dir", "/var/lib/larder", config])
            #expect(
                unitMissing.status == 0 && !unitMissing.out.contains("larder ca init"), "root's key is no use there: \(unitMissing.out)")

            #expect(try larder(["ca", "init", "--config", config]).status == 0)
            #expect(try larder(["check-config", config]).status == 0)

            try "[tls]\nintercept = [\"a.example\", \"*.b.example\"]\nca_dir = \"\(ca)\"\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            let narrow = try larder(["check-config", config])
            #expect(narrow.status == 1, "\(narrow.err)")
            #expect(
                narrow.err.contains(
                    "tls.intercept lists *.b.example, which the CA in \(ca) may not sign for: replace it\n"
                ),
                "\(narrow.err)")
            // The one command that replaces it: ca init without --rotate refuses a CA that is there.
            #expect(
                narrow.err.contains("replace it with: larder ca init --config \(config) --rotate, then make clients trust"), "\(narrow.err)"
            )
            #expect(!narrow.err.contains("make it there"), "\(narrow.err)")
            // For the packaged unit's state directory: the service makes it, so its key is the service's.
            let unit = try larder(["check-config", "--state-dir", "/var/lib/larder", config])
            #expect(unit.status == 1, "\(unit.err)")
            #expect(
                unit.err.contains(
                    "replace it with: sudo mv \(ca) \(ca).old-$(date +%Y%m%d%H%M%S) && sudo systemctl reload-or-restart larder"),
                "\(unit.err)")
            // One way to replace it, for this check, not a second one that contradicts it (review 125).
            #expect(!unit.err.contains("larder ca init --config \(config) --rotate;"), "\(unit.err)")
            // serve, which does not start on it, says how to replace it for its file.
            let refused = try larder(serve)
            #expect(refused.status == 1 && refused.err.contains("larder: larder ca init --config \(config) --rotate;"), "\(refused.err)")
            #expect(try larder(["ca", "init", "--config", config, "--rotate"]).status == 0)
            #expect(try larder(["check-config", config]).status == 0)

            #expect(chmod(ca + "/ca.key", 0o604) == 0)
            let exposed = try larder(serve)
            #expect(exposed.status == 1 && exposed.err.contains("readable by others (mode 604)"), "\(exposed.err)")
        }

        /// Why a CA cannot be read decides the advice: a missing one is made by serve, one that
        /// is there but unreadable needs its owner changed or a new one (review 124).
        @Test func aCAThatCannotBeReadIsAdvisedOnByWhy() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let missing = try larder(["ca", "show", "--dir", directory + "/none"])
            #expect(
                missing.status == 1
                    && missing.err.contains("(serve makes one at start for tls.intercept, or larder ca init --config FILE)"),
                "\(missing.err)")
            try FileManager.default.createDirectory(atPath: directory + "/odd/ca.pem", withIntermediateDirectories: true)
            let unreadable = try larder(["ca", "show", "--dir", directory + "/odd"])
            #expect(
                unreadable.status == 1 && unreadable.err.contains("this user cannot read it: look as root or as the user serve runs as"),
                "\(unreadable.err)")
            #expect(!unreadable.err.contains("larder ca init"), "ca init refuses a CA that is there: \(unreadable.err)")
        }

        /// A preset's HTTPS hosts missing from tls.intercept: a rotation only when a CA is there.
        @Test func aPresetsMissingHostsCallForANewCAOnlyWhenOneIsThere() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[cache]\npresets = [\"pypi\"]\n[tls]\nintercept = [\"pypi.org\"]\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            let none = try larder(["check-config", config])
            #expect(
                none.status == 0 && none.out.contains("caches HTTPS from files.pythonhosted.org only once tls.intercept lists it\n"),
                "\(none.out)")
            #expect(!none.out.contains("rotate"), "there is no CA to rotate: serve makes it for the list: \(none.out)")
            #expect(try larder(["ca", "init", "--config", config]).status == 0)
            let made = try larder(["check-config", config])
            #expect(
                made.out.contains(
                    "only once tls.intercept lists it and the CA is replaced to permit it (serve reads the CA from"),
                "\(made.out)")
        }

        /// docs/OPERATIONS.md, "Rotating the CA": under the unit, the CA moved away and a reload
        /// makes the new one, for the grown list, and serves with it at once.
        @Test func aCAMovedAwayIsMadeAgainForTheGrownListOnAReload() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let ca = directory + "/ca"
            let config = "[tls]\nintercept = [\"a.example\"]\nca_dir = \"\(ca)\"\n"
            let running = try Larder(config: config)
            _ = try running.child.waitForOutput { $0.contains("tls: intercepting CONNECT for a.example") }
            let first = try larder(["ca", "show", "--dir", ca])
            #expect(first.status == 0 && !first.out.contains("b.example"), "\(first.out)")

            let grown = "[tls]\nintercept = [\"a.example\", \"b.example\"]\nca_dir = \"\(ca)\"\n"
            try running.rewriteConfig(grown)
            #expect(try larder(["check-config", running.configPath]).status == 1, "the old CA cannot serve the grown list")
            // A reload on the old CA is rejected with the one command that replaces it for this file.
            running.child.signal(SIGHUP)
            let rejected = try running.child.waitForOutput { $0.contains("keeping the running configuration") }
            #expect(rejected.contains("reload rejected: larder ca init --config \(running.configPath) --rotate;"), "\(rejected)")
            #expect(rename(ca, ca + ".old") == 0)
            try running.reload(grown)
            let log = try running.child.waitForOutput { $0.contains("tls: created the CA in \(ca)") }
            #expect(log.contains("permits=a.example,b.example"), "\(log)")
            let second = try larder(["ca", "show", "--dir", ca])
            #expect(second.status == 0 && second.out.contains("b.example"), "\(second.out)")
            #expect(try larder(["check-config", running.configPath]).status == 0)
            #expect(FileManager.default.fileExists(atPath: ca + ".old/ca.key"), "the old one is kept until the operator removes it")
        }

        @Test func aReloadThatBreaksTheCAIsRejectedAndTheProxyKeepsServing() throws {
            let origin = try Origin()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let ca = directory + "/ca"
            let config = "[tls]\nintercept = [\"a.example\"]\nca_dir = \"\(ca)\"\n"
            try config.write(toFile: directory + "/larder.toml", atomically: true, encoding: .utf8)
            #expect(try larder(["ca", "init", "--config", directory + "/larder.toml"]).status == 0)
            let running = try Larder(config: config)
            _ = try running.child.waitForOutput { $0.contains("tls: intercepting CONNECT for a.example") }

            #expect(chmod(ca + "/ca.key", 0o644) == 0)
            try running.rewriteConfig(config + "[log]\nlevel = \"info\"\n")
            running.child.signal(SIGHUP)
            let log = try running.child.waitForOutput { $0.contains("keeping the running configuration") }
            #expect(log.contains("reload rejected: tls.intercept is set, but the CA cannot be used"), "\(log)")
            #expect(log.contains("readable by others (mode 644)"))
            #expect(try Curl.viaProxy(running.proxy, [origin.url("/still-served")]).status == 200)
        }

        /// What the systemd unit's ExecStartPre does: in the working directory (the unit's
        /// StateDirectory), make the CA for the configured hosts once, and never touch it again.
        @Test func initIfMissingMakesTheCAOnceInTheStateDirectoryAndOnlyWhenHostsAreListed() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            func initIfMissing() throws -> Int32 {
                let child = try ChildProcess(
                    "/bin/sh", ["-c", "cd \"$0\" && exec \"$1\" ca init --if-missing --config \"$2\"", directory, Paths.larder, config])
                child.waitUntilExit()
                return child.terminationStatus
            }
            try "[proxy]\nheader_timeout = \"5s\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            #expect(try initIfMissing() == 0)
            #expect(!FileManager.default.fileExists(atPath: directory + "/larder-ca"), "nothing to intercept: no CA")

            try "[tls]\nintercept = [\"a.example\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            #expect(try initIfMissing() == 0)
            let made = try String(contentsOfFile: directory + "/larder-ca/ca.pem", encoding: .utf8)
            #expect(try larder(["ca", "show", "--dir", directory + "/larder-ca"]).out.contains("a.example"))
            #expect(try initIfMissing() == 0)
            #expect(try String(contentsOfFile: directory + "/larder-ca/ca.pem", encoding: .utf8) == made, "kept as it was")
        }
    }
}

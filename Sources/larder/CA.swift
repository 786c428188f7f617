import ArgumentParser
import Glibc
import LarderConfig
import LarderIO
import LarderTLS

/// `larder ca init|show`: the local CA that signs the certificates of intercepted hosts.
struct CA: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Create or show the local CA used for HTTPS interception (tls.intercept).",
        subcommands: [Init.self, Show.self])

    /// Where the CA lives: `--dir`, else the configuration's `tls.ca_dir`.
    struct Location: ParsableArguments {
        @Option(
            name: .long, help: "The configuration file (default: $LARDER_CONFIG, then /etc/larder/larder.toml if present, as serve).")
        var config: String?
        @Option(name: .long, help: "The CA directory (default: the configuration's tls.ca_dir).")
        var dir: String?
        @Option(name: .customLong("state-dir"), help: StateDirectoryOption.help)
        var stateDir: String?

        /// The configuration and the CA's absolute directory: `--dir` against the working
        /// directory, else `tls.ca_dir` as `serve` resolves it.
        func load() throws -> (Config, String) {
            let path = config ?? ConfigLoader.defaultPath(environment: Environment.variables)
            let stateDirectory = StateDirectory.current(flag: stateDir, configPath: path)
            var loaded = ConfigLoader.embeddedDefaults(stateDirectory: stateDirectory)
            if let path {
                switch ConfigLoader.load(path: path, stateDirectory: stateDirectory) {
                case .success(let parsed): loaded = parsed
                case .failure(let errors):
                    printError(errors.description)
                    throw ExitCode(1)
                }
            }
            let directory = dir.map { StateDirectory.absolute($0, against: FileSystem.workingDirectory() ?? "/") }
            return (loaded, directory ?? loaded.tls.caDirectory)
        }
    }

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create ca.pem and ca.key (ECDSA P-256), constrained to the hosts of tls.intercept.",
            discussion: """
                The certificate's Name Constraints (RFC 5280 §4.2.1.10) permit exactly the names
                tls.intercept lists (a host, or the domain of a "*." glob), no IP address, and no
                real e-mail or URI name, and its extended key usage is serverAuth, so a leaked key
                cannot impersonate any other site, nor sign client, e-mail or code certificates.
                --rotate also upgrades a CA made without those limits. Add hosts later with --rotate (clients
                must then trust the new certificate). Existing files are never overwritten without it.
                Example:
                  larder ca init --config /etc/larder/larder.toml
                """)
        @OptionGroup var location: Location
        @Flag(help: "Replace an existing CA.")
        var rotate = false
        @Flag(help: "No Name Constraints: the CA can then sign for any name. Not recommended.")
        var unconstrained = false
        @Flag(
            name: .customLong("if-missing"),
            help: "Do nothing when the CA exists or tls.intercept is empty (the systemd unit runs this before serve).")
        var ifMissing = false

        func run() throws {
            let (config, directory) = try location.load()
            if ifMissing {
                let present = [LocalCA.certificateFile, LocalCA.keyFile].contains { access(directory + "/" + $0, F_OK) == 0 }
                if present || (config.tls.intercept.isEmpty && !unconstrained) { return }
            }
            let permitted = unconstrained ? nil : LocalCA.permittedNames(for: config.tls.intercept)
            if unconstrained {
                printError("warning: an unconstrained CA can impersonate every site to clients that trust it; guard its key")
            }
            do {
                let facts = try LocalCA.create(in: directory, permitting: permitted, rotate: rotate)
                print("created \(directory)/\(LocalCA.certificateFile) and \(LocalCA.keyFile)")
                if directory != config.tls.caDirectory {
                    print("note: serve with this configuration reads the CA from \(config.tls.caDirectory) (tls.ca_dir), not from here")
                }
                if let owner = Self.otherOwner(ofParentOf: directory) {
                    // The key is 0600 and root's: a service running as the directory's owner
                    // could not read it. Changing owners as root in a directory another user
                    // controls invites symlink races, so this is left to the operator.
                    printError(
                        "warning: made as root in a directory owned by uid \(owner); a service running as that user cannot read the key: "
                            + "chown -R \(owner): \(directory), or let the systemd unit make it (systemctl restart larder)")
                }
                print(Show.describe(facts))
                print("Next: make clients trust it (larder ca show prints how), then run larder with this configuration.")
            } catch {
                printError("larder ca init: \(error)")
                throw ExitCode(1)
            }
        }

        /// The owner of the directory holding `directory`, when this process runs as root and
        /// that owner is another user (the service's state directory).
        static func otherOwner(ofParentOf directory: String) -> uid_t? {
            guard geteuid() == 0 else { return nil }
            var info = stat()
            let parent = StateDirectory.absolute(directory + "/..", against: "/")
            guard (try? Syscall.call("stat", path: parent) { stat($0, &info) }) != nil, info.st_uid != 0 else { return nil }
            return info.st_uid
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the CA's subject, constraints, fingerprint and expiry, and how to trust it.")
        @OptionGroup var location: Location

        func run() throws {
            let (config, directory) = try location.load()
            let facts: CertificateFacts
            do {
                facts = try LocalCA.load(from: directory)
            } catch {
                printError("larder ca show: \(error)")
                throw ExitCode(1)
            }
            print(Show.describe(facts))
            if facts.lacksServerOnlyLimits { print("warning: " + LocalCA.rotateForLimits) }
            let outside = LocalCA.uncovered(config.tls.intercept, by: facts)
            if !outside.isEmpty {
                print(
                    "warning: tls.intercept lists \(outside.map(\.description).joined(separator: ", ")), "
                        + "which this CA may not sign for: run larder ca init --rotate")
            }
            print(Show.trustInstructions(path: directory + "/" + LocalCA.certificateFile))
        }

        static func describe(_ facts: CertificateFacts) -> String {
            let constraints = facts.permittedDNS.map { $0.joined(separator: ", ") } ?? "none (it can sign for any name)"
            let days = facts.secondsLeft / 86_400
            func names(_ list: [String]) -> String {
                list.isEmpty ? "any (not constrained)" : list == [".invalid"] ? "none (only under .invalid)" : list.joined(separator: ", ")
            }
            let usages = facts.extendedKeyUsage.map { $0.joined(separator: ", ") } ?? "any (no extended key usage)"
            return """
                subject:      \(facts.subject)
                permits:      \(constraints)
                e-mail names: \(names(facts.permittedEmail))
                URI names:    \(names(facts.permittedURI))
                key usage:    \(usages)
                sha256:       \(facts.sha256Fingerprint)
                expires:      \(facts.notAfter) (\(facts.secondsLeft < 0 ? "expired" : "in \(days) days"))
                """
        }

        static func trustInstructions(path: String) -> String {
            """

            Trust it (each client needs one of these):
              Debian/Ubuntu system store:  cp \(path) /usr/local/share/ca-certificates/larder.crt && update-ca-certificates
              curl:                        curl --cacert \(path) ... (or CURL_CA_BUNDLE)
              Python requests, pip:        REQUESTS_CA_BUNDLE=\(path) / PIP_CERT=\(path)
                                           (both replace the default bundle: point them at a bundle that has this CA added)
              Node, npm:                   NODE_EXTRA_CA_CERTS=\(path)
              apt:                         Acquire::https::CaInfo "\(path)"; in /etc/apt/apt.conf.d/
              Docker (per registry):       cp \(path) /etc/docker/certs.d/REGISTRY/ca.crt
            """
        }
    }
}

import ArgumentParser
import Glibc
import LarderConfig
import LarderIO
import LarderServer
import LarderTLS

/// `larder ca init|show`: the local CA that signs the certificates of intercepted hosts.
struct CA: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Create or show the local CA for HTTPS interception (tls.intercept).",
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

        /// The file read: `--config`, else as `serve` finds it; nil for the embedded defaults.
        var configPath: String? { config ?? ConfigLoader.defaultPath(environment: Environment.variables) }

        /// The configuration and the CA's absolute directory: `--dir` against the working
        /// directory, else `tls.ca_dir` as `serve` resolves it.
        func load() throws -> (Config, String) {
            let path = configPath
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
            let directory = dir.map { StateDirectory.absolute($0) }
            return (loaded, directory ?? loaded.tls.caDirectory)
        }
    }

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create ca.pem and ca.key (P-256), limited to tls.intercept's hosts.",
            usage: "larder ca init [<options>]",
            discussion: """
                The certificate's Name Constraints (RFC 5280 §4.2.1.10) permit exactly
                the names tls.intercept lists (a host, or the domain of a "*." glob), no
                IP address, and no real e-mail or URI name, and its extended key usage
                is serverAuth, so a leaked key cannot impersonate any other site, nor
                sign client, e-mail or code certificates. --rotate also upgrades a CA
                made without those limits. Add hosts later with --rotate (clients must
                then trust the new certificate). Existing files are never overwritten
                without it.
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
            help:
                "Do nothing when the CA exists or tls.intercept is empty (for scripts and image builds; serve makes a missing one itself).")
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
                // Another process (serve, a second init) may make it meanwhile: that one is kept.
                guard let facts = try LocalCA.create(in: directory, permitting: permitted, rotate: rotate, onlyIfAbsent: ifMissing)
                else { return }
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
                            + "chown -R \(owner): \(directory), or let the service make its own (mv \(directory) "
                            + "\(directory).old-$(date +%Y%m%d%H%M%S) && systemctl reload-or-restart larder)")
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
            abstract: "Print the CA's constraints, fingerprint, expiry and how to trust it.",
            usage: "larder ca show [<options>]")
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
            let advice = LocalCA.replaceAdvice(config: location.configPath)
            if facts.lacksServerOnlyLimits { print("warning: \(LocalCA.rotateForLimits) (\(advice))") }
            if facts.secondsLeft <= 0 {
                print("warning: the CA expired \(facts.notAfter): serve refuses it; replace it (\(advice))")
            }
            let outside = LocalCA.uncovered(config.tls.intercept, by: facts)
            if !outside.isEmpty {
                print(
                    "warning: tls.intercept lists \(outside.map(\.description).joined(separator: ", ")), "
                        + "which this CA may not sign for: replace it (\(advice))")
            }
            do {
                _ = try LocalCA.trusted(from: directory)
            } catch {
                // The instructions copy ca.pem whole: with another block in it, they would
                // install that too.
                print("warning: \(error); until then, trust it with larder client, which installs the certificate alone")
                return
            }
            print(Show.trustInstructions(path: directory + "/" + LocalCA.certificateFile, hosts: config.tls.intercept))
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

        /// How to trust the CA without taking any trust away: the system store and Docker add
        /// it; apt trusts the combined bundle per intercepted host (`Acquire::https::CaInfo`
        /// would replace its trust for every source); tools that take one CA file get the
        /// combined bundle, never the CA alone. `larder client` prints each tool's whole setup.
        static func trustInstructions(path: String, hosts: [HostRule]) -> String {
            let bundle = ClientSetup.bundleFile
            let exact = hosts.compactMap { rule -> String? in
                if case .host(let name) = rule { return name }
                return nil
            }
            let aptHost = exact.first ?? "HOST"
            return """

                Trust it (this adds Larder's CA; it replaces no other trust):
                  Debian/Ubuntu system store:  cp \(path) /usr/local/share/ca-certificates/larder.crt && update-ca-certificates
                  RHEL/Fedora system store:    cp \(path) /etc/pki/ca-trust/source/anchors/larder.pem && update-ca-trust
                  Combined bundle (for the tools below that take one CA file in place of their own):
                                               cat /etc/ssl/certs/ca-certificates.crt \(path) > \(bundle)
                  apt, per intercepted host:   Acquire::https::\(aptHost)::CaInfo "\(bundle)"; in /etc/apt/apt.conf.d/
                                               (one line per host; never Acquire::https::CaInfo, which replaces apt's trust for every source)
                  pip, requests, uv, poetry:   PIP_CERT / REQUESTS_CA_BUNDLE / SSL_CERT_FILE=\(bundle) (the bundle, never \(path) alone)
                  git, cargo, curl:            http.sslCAInfo / CARGO_HTTP_CAINFO / CURL_CA_BUNDLE=\(bundle)
                  Node, npm, yarn, pnpm:       NODE_EXTRA_CA_CERTS=\(path) (adds to Node's own roots)
                  Docker (per registry):       cp \(path) /etc/docker/certs.d/REGISTRY/larder-ca.crt
                larder client prints each tool's whole setup (proxy included); sudo larder client --apply writes it.
                """
        }
    }
}

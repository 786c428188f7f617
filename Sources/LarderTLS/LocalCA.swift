import Glibc
import LarderConfig
import LarderIO

/// The certificate authority Larder signs intercepted hosts' certificates with: `ca.pem` and
/// `ca.key` in `tls.ca_dir`. By default its Name Constraints (RFC 5280 §4.2.1.10) permit only
/// the names `tls.intercept` lists and no IP address, so a leaked key cannot impersonate any
/// other site to a client that trusts it.
public enum LocalCA {
    public static let certificateFile = "ca.pem"
    public static let keyFile = "ca.key"
    /// Ten years: the CA is replaced with `--rotate` when the host list grows, not when it expires.
    public static let validDays = 3650

    /// A CA that cannot be created, read or used, with what to do about it.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// Whether what fails is the CA itself (too narrow, expired), which only a new one
        /// mends: the caller adds how to make it where it runs (``replaceAdvice(config:)``).
        public let needsNewCA: Bool
        init(_ description: String, needsNewCA: Bool = false) {
            self.description = description
            self.needsNewCA = needsNewCA
        }
    }

    /// How a CA is replaced, for messages that cannot tell how Larder runs: `ca init --rotate`
    /// from a shell, or, under the packaged unit, by the service itself (a key made by root
    /// would be unreadable to the service's own user).
    /// `config`: the configuration file the command read (nil: the embedded defaults), named
    /// absolute so that the command works from any directory.
    public static func replaceAdvice(config: String?) -> String {
        "larder ca init\(config.map { " --config \(StateDirectory.absolute($0))" } ?? "") --rotate; under the packaged systemd unit, move tls.ca_dir "
            + "away and systemctl reload-or-restart larder, which makes a new one (docs/OPERATIONS.md, \"Rotating the CA\"), "
            + "then make clients trust the new one"
    }

    /// What to do about a CA that ``CertificateFacts/lacksServerOnlyLimits``.
    public static let rotateForLimits =
        "the CA lacks extended key usage serverAuth and the e-mail and URI name constraints: its key could sign client, "
        + "e-mail or code-signing certificates: replace it"

    /// The DNS subtrees that permit exactly what `rules` match: a host itself, and for a `*.`
    /// domain the domain (a subtree also permits the names under it).
    public static func permittedNames(for rules: [HostRule]) -> [String] {
        var names: [String] = []
        for name in rules.compactMap(subtree(of:)) where !names.contains(name) { names.append(name) }
        return names
    }

    /// The rules a CA with these facts cannot sign for: none when it has no Name Constraints.
    public static func uncovered(_ rules: [HostRule], by facts: CertificateFacts) -> [HostRule] {
        rules.filter { rule in subtree(of: rule).map { !facts.permits($0) } ?? true }
    }

    /// The DNS subtree a rule needs the CA to permit; nil for a network (never signed for).
    private static func subtree(of rule: HostRule) -> String? {
        switch rule {
        case .host(let host): host
        case .domain(let suffix): String(suffix.dropFirst())
        case .network: nil
        }
    }

    /// Why `tls` cannot be used as configured, one message each: none when interception is off,
    /// when `serve` will make the CA (``provision(for:)``), or when the CA is present, private,
    /// sound and permits every listed host.
    public static func problems(with tls: TLSConfig) -> [String] {
        if !tls.upstreamCAFile.isEmpty {
            do {
                try TLSInterceptor.checkTrustAnchors(tls.upstreamCAFile)
            } catch {
                return [error.description]
            }
        }
        guard !tls.intercept.isEmpty, provision(for: tls) == .nothing else { return [] }
        do {
            return problems(with: tls, facts: try load(from: tls.caDirectory))
        } catch {
            return ["tls.intercept is set, but the CA cannot be used: \(error)"]
        }
    }

    /// Why a CA with these facts cannot serve `tls.intercept`: a listed host it may not sign
    /// for, or its expiry.
    static func problems(with tls: TLSConfig, facts: CertificateFacts) -> [String] {
        let outside = uncovered(tls.intercept, by: facts)
        guard outside.isEmpty else {
            let names = outside.map(\.description).joined(separator: ", ")
            return ["tls.intercept lists \(names), which the CA in \(tls.caDirectory) may not sign for: replace it"]
        }
        if facts.secondsLeft <= 0 { return ["the CA in \(tls.caDirectory) expired \(facts.notAfter): replace it"] }
        return []
    }

    /// Creates a CA in `directory` (made if missing): the key mode 0600, the certificate 0644.
    /// Refuses when either file exists, unless `rotate`, which replaces both (each renamed into
    /// place, the key first). `permitting`: the DNS names to constrain it to; nil for none.
    @discardableResult
    public static func create(in directory: String, permitting: [String]?, rotate: Bool) throws(Failure) -> CertificateFacts {
        // Not nil: without `onlyIfAbsent`, a file there is an error, not a reason to skip.
        try create(in: directory, permitting: permitting, rotate: rotate, onlyIfAbsent: false)!
    }

    /// The lock file in `tls.ca_dir` held while a CA is checked for and made, so that two
    /// processes starting on one empty directory (two `serve`s, `ca init --if-missing` beside
    /// `serve`) make one CA between them rather than two half-overwritten ones.
    public static let lockFile = ".ca.lock"

    /// ``create(in:permitting:rotate:)`` under ``lockFile``, with presence checked again once
    /// the lock is held: `onlyIfAbsent` returns nil when a file of the CA is there by then (made
    /// by whoever held the lock first), which the caller then loads like any CA on disk.
    public static func create(
        in directory: String, permitting: [String]?, rotate: Bool, onlyIfAbsent: Bool
    ) throws(Failure) -> CertificateFacts? {
        let certificatePath = directory + "/" + certificateFile
        let keyPath = directory + "/" + keyFile
        if permitting?.isEmpty == true {
            throw Failure("tls.intercept lists no host to constrain the CA to; list them first, or pass --unconstrained")
        }
        let lock: Int32
        do {
            try FileSystem.makeDirectories(directory)
            lock = try Syscall.call("open", path: directory + "/" + lockFile) { open($0, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        } catch {
            throw Failure("cannot write the CA into \(directory): \(error)")
        }
        // Closing the descriptor releases the lock, on every path out.
        defer { Syscall.close(lock) }
        do {
            _ = try Syscall.call("flock") { flock(lock, LOCK_EX) }
        } catch {
            throw Failure("cannot lock \(directory)/\(lockFile): \(error)")
        }
        if !rotate {
            for path in [certificatePath, keyPath] where presence(of: path) != .absent {
                if onlyIfAbsent { return nil }
                throw Failure("\(path) exists; pass --rotate to replace the CA (clients must then trust the new one)")
            }
        }
        let made: (certificate: String, key: String)
        do {
            made = try OpenSSL.makeAuthority(commonName: "Larder local CA", permittedDNS: permitting, validDays: validDays)
        } catch {
            throw Failure("cannot make the CA: \(error)")
        }
        do {
            try replace(keyPath, with: made.key, mode: 0o600)
            try replace(certificatePath, with: made.certificate, mode: 0o644)
        } catch {
            throw Failure("cannot write the CA into \(directory): \(error)")
        }
        return try facts(ofCertificate: made.certificate, at: certificatePath)
    }

    /// Reads the CA in `directory` and checks it can be used: both files present, the key
    /// readable by its owner only (as ssh insists), the key the certificate's, a CA certificate.
    public static func load(from directory: String) throws(Failure) -> CertificateFacts {
        try read(from: directory).facts
    }

    /// ``load(from:)`` with the two files' text.
    static func read(from directory: String) throws(Failure) -> (facts: CertificateFacts, certificate: String, key: String) {
        let certificatePath = directory + "/" + certificateFile
        let keyPath = directory + "/" + keyFile
        let certificate: String
        let key: String
        do {
            certificate = String(decoding: try FileSystem.readWhole(certificatePath, limit: 1 << 20), as: UTF8.self)
            let fd = try Syscall.call("open", path: keyPath) { open($0, O_RDONLY | O_CLOEXEC) }
            defer { Syscall.close(fd) }
            var info = stat()
            _ = try Syscall.call("fstat") { fstat(fd, &info) }
            if info.st_mode & 0o077 != 0 {
                throw Failure(
                    "\(keyPath) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
            }
            key = String(decoding: try FileSystem.read(fd, at: 0, count: 1 << 20), as: UTF8.self)
        } catch let failure as Failure {
            throw failure
        } catch {
            // Missing: serve makes it. There but unreadable: most often made by another user
            // (root) than the one serve runs as, which a new CA does not mend by itself.
            let missing = (error as? SystemError)?.errno == ENOENT
            throw Failure(
                "cannot read the CA in \(directory): \(error) "
                    + (missing
                        ? "(serve makes one at start for tls.intercept, or larder ca init --config FILE)"
                        : "(this user cannot read it: look as root or as the user serve runs as, which must be able to; "
                            + "chown it to that user, or replace it)"))
        }
        let facts = try facts(ofCertificate: certificate, at: certificatePath)
        guard facts.isCA else { throw Failure("\(certificatePath) is not a CA certificate") }
        let matches: Bool
        do {
            matches = try OpenSSL.key(key, matches: certificate)
        } catch {
            throw Failure("\(keyPath): \(error)")
        }
        guard matches else { throw Failure("\(keyPath) is not the key of \(certificatePath)") }
        return (facts, certificate, key)
    }

    private static func facts(ofCertificate text: String, at path: String) throws(Failure) -> CertificateFacts {
        do {
            return try OpenSSL.facts(ofCertificatePEM: text)
        } catch {
            throw Failure("\(path): \(error)")
        }
    }

    /// Writes `text` to a new file beside `path` with `mode`, then renames it over `path`. The
    /// temporary name is this process's own, so no other writer's file is removed or renamed.
    private static func replace(_ path: String, with text: String, mode: mode_t) throws(SystemError) {
        let temporary = path + ".new.\(getpid())"
        try FileSystem.remove(temporary)
        let fd = try FileSystem.createExclusive(temporary)
        do {
            _ = try Syscall.call("fchmod") { fchmod(fd, mode) }
            try FileSystem.writeAll(fd, Array(text.utf8))
            _ = try Syscall.call("fsync") { fsync(fd) }
            Syscall.close(fd)
        } catch {
            Syscall.close(fd)
            throw error
        }
        try FileSystem.rename(temporary, path)
    }
}

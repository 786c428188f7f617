import Glibc
import LarderConfig
import LarderIO

/// The CA made when the daemon needs it: `serve` at start and on a reload, and
/// `larder ca init --if-missing`, create it when `tls.intercept` lists hosts and `tls.ca_dir`
/// holds neither of its files. A CA that is there, whole or in part, is never replaced: a half
/// one is reported by ``load(from:)``, not overwritten.
extension LocalCA {
    /// What to do about the CA before interception starts.
    public enum Provision: Equatable, Sendable {
        /// Interception is off, or a file of the CA is there (or cannot be looked at).
        case nothing
        /// Make a CA constrained to these DNS names.
        case create(permitting: [String])
    }

    /// Whether the files of a CA are absent (`ENOENT`), there, or could not be looked at.
    public enum FilePresence: Equatable, Sendable {
        case absent
        case present
        case unknown
    }

    /// The decision alone: a CA is made only when interception asks for one and both files
    /// are known to be absent. A directory that cannot be read is left to ``load(from:)`` to report.
    public static func provision(intercept: [HostRule], certificate: FilePresence, key: FilePresence) -> Provision {
        guard !intercept.isEmpty, certificate == .absent, key == .absent else { return .nothing }
        return .create(permitting: permittedNames(for: intercept))
    }

    /// What `tls` and the files in `tls.ca_dir` call for now.
    public static func provision(for tls: TLSConfig) -> Provision {
        provision(
            intercept: tls.intercept, certificate: presence(of: tls.caDirectory + "/" + certificateFile),
            key: presence(of: tls.caDirectory + "/" + keyFile))
    }

    /// Makes the CA `tls` asks for (``provision(for:)``): its facts, or nil when nothing was made.
    /// A directory holding one file of the two may be another process making the CA: the lock
    /// is waited for, and what is there then decides.
    public static func createIfMissing(for tls: TLSConfig) throws(Failure) -> CertificateFacts? {
        guard !tls.intercept.isEmpty else { return nil }
        let certificate = presence(of: tls.caDirectory + "/" + certificateFile)
        let key = presence(of: tls.caDirectory + "/" + keyFile)
        // Both there: nothing to make, and no lock file to write (the directory may be read-only).
        // One that cannot be looked at is left to load(from:) to report.
        if certificate == .present && key == .present || certificate == .unknown || key == .unknown { return nil }
        let names = permittedNames(for: tls.intercept)
        guard certificate == .absent && key == .absent else {
            // Half a CA, perhaps half made: wait for its maker if it is one. A lock that cannot be
            // taken (a read-only directory) leaves the half CA to load(from:) to report.
            return (try? create(in: tls.caDirectory, permitting: names, rotate: false, onlyIfAbsent: true)) ?? nil
        }
        return try create(in: tls.caDirectory, permitting: names, rotate: false, onlyIfAbsent: true)
    }

    /// Whether a directory entry is at `path` (a dangling link counts: it is not replaced).
    static func presence(of path: String) -> FilePresence {
        var info = stat()
        do {
            _ = try Syscall.call("lstat", path: path) { lstat($0, &info) }
            return .present
        } catch {
            return error.errno == ENOENT ? .absent : .unknown
        }
    }
}

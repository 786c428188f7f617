import LarderConfig
import LarderHTTP
import LarderIO

/// Checks `Proxy-Authorization: Basic` (RFC 9110 §11.7.1, RFC 7617) against `proxy.auth_users`.
///
/// Password hashes are slow on purpose, so a verification runs on the authenticator's own
/// thread and its verdict is remembered for a few minutes, keyed by the exact header value:
/// a client that keeps its connection or sends the same credentials again is answered from
/// the table without hashing. A remembered verdict counts only while the user's hash in the
/// current configuration is the one it was made against, so a reload that changes or removes
/// a user takes effect at once. Wrong passwords are remembered too, so repeating one costs
/// no hashing either.
///
/// State: `verdicts` behind its mutex (every loop reads it, the worker writes it); `worker`
/// owns the hashing.
final class ProxyAuthenticator: Sendable {
    enum Check {
        case allowed(user: String)
        case denied(reason: String)
        /// A hash must be computed: pass the job to ``verify(_:completion:)``.
        case verify(Job)
    }

    /// One verification to run off the loop.
    struct Job: Sendable {
        let header: String
        let user: String
        let password: String
        let hash: String
        /// False when the user does not exist: the hash is still computed (against another
        /// user's hash) so that a wrong user name takes as long as a wrong password.
        let userExists: Bool
    }

    private struct Verdict {
        let hash: String
        let valid: Bool
        let expires: UInt64
    }

    private let verdicts = Locked<[String: Verdict]>([:])
    private let worker = BlockingWorker(name: "larder-auth")
    static let rememberFor: UInt64 = 300_000_000_000
    static let tableLimit = 4096
    /// Verifications queued beyond this are refused with 503 instead of piling up.
    static let backlogLimit = 256

    /// What to do with a request carrying `values` (every Proxy-Authorization field line).
    func check(_ values: [String], users: [ProxyUser], now: UInt64) -> Check {
        guard let header = values.first else { return .denied(reason: "no Proxy-Authorization") }
        guard values.count == 1 else { return .denied(reason: "more than one Proxy-Authorization") }
        guard let credentials = BasicCredentials(header: header) else {
            return .denied(reason: "Proxy-Authorization is not valid Basic credentials")
        }
        let user = users.first(where: { $0.name == credentials.user })
        let hash = user?.passwordHash ?? users[0].passwordHash
        if let verdict = verdicts.withLock({ $0[header] }), verdict.hash == hash, now < verdict.expires, user != nil {
            return verdict.valid ? .allowed(user: credentials.user) : .denied(reason: "wrong password for '\(credentials.user)'")
        }
        return .verify(
            Job(header: header, user: credentials.user, password: credentials.password, hash: hash, userExists: user != nil))
    }

    /// Whether the verification thread has room for another job.
    var hasRoom: Bool { worker.pendingCount < ProxyAuthenticator.backlogLimit }

    /// Hashes on the authenticator's thread, remembers the verdict, then calls `completion`
    /// (on that thread) with it.
    func verify(_ job: Job, completion: @escaping @Sendable (Bool) -> Void) {
        worker.submit { [self] in
            let matches = PasswordHash.verify(password: job.password, hash: job.hash)
            let valid = matches && job.userExists
            if job.userExists {
                verdicts.withLock { table in
                    if table.count >= ProxyAuthenticator.tableLimit { table.removeAll(keepingCapacity: true) }
                    table[job.header] = Verdict(
                        hash: job.hash, valid: valid, expires: Clocks.monotonicNanos() &+ ProxyAuthenticator.rememberFor)
                }
            }
            completion(valid)
        }
    }

    func stop() { worker.stop() }
}

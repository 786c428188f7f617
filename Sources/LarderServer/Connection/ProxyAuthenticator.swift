import LarderConfig
import LarderHTTP
import LarderIO

/// Checks `Proxy-Authorization: Basic` (RFC 9110 §11.7.1, RFC 7617) against `proxy.auth_users`.
///
/// Password hashes are slow on purpose, so a verification runs on the authenticator's own
/// thread and its verdict is remembered for a few minutes, keyed by the credentials (user and
/// password as decoded, so spellings of one header are one entry): a client that keeps its
/// connection or sends the same credentials again is answered from the table without hashing.
/// A remembered verdict counts only while the user's hash in the current configuration is the
/// one it was made against, so a reload that changes or removes a user takes effect at once.
///
/// One client must not lock the others out (review 117): wrong passwords are remembered apart
/// from right ones, so a flood of them never evicts a user's verdict; the checks waiting for
/// the thread are taken one client address at a time (``FairQueue``), each address holding
/// ``perClientBacklog`` at most, so a user's check waits behind one of each other client's,
/// not behind a flood; and requests with the same credentials arriving while their check
/// waits share it, as long as the user's hash is still the one it checks against.
///
/// State: `verdicts` and `waiting` behind their mutexes (every loop reads and adds, the worker
/// takes and writes); `worker` owns the hashing.
final class ProxyAuthenticator: Sendable {
    enum Check {
        case allowed(User)
        case denied(reason: String)
        /// A hash must be computed: pass the job to ``verify(_:client:completion:)``.
        case verify(Job)
    }

    /// One verification to run off the loop.
    struct Job: Sendable {
        /// The credentials, as the verdict tables and the waiting checks key them.
        let key: String
        let user: String
        let password: String
        let hash: String
        /// False when the user does not exist: the hash is still computed (against another
        /// user's hash) so that a wrong user name takes as long as a wrong password.
        let userExists: Bool

        /// What a waiting check is shared by: the credentials and the hash they are checked
        /// against, so a request made after a reload changed or removed the user never takes
        /// the verdict of a check made with the old hash.
        var identity: Identity { Identity(key: key, hash: hash, userExists: userExists) }
    }

    /// A user a request was let in as, with the hash its password matched: what a reload
    /// that changes or removes the user no longer lets in (``isCurrent(_:users:)-(User,_)``).
    struct User: Sendable, Equatable {
        let name: String
        let hash: String
    }

    struct Identity: Hashable, Sendable {
        let key: String
        let hash: String
        let userExists: Bool
    }

    /// What a verification found; `busy`: it never ran (another client's check took its place
    /// in a full queue).
    enum Outcome: Sendable {
        case valid, invalid, busy
    }

    private struct Verdict {
        let hash: String
        let expires: UInt64
    }

    /// Right and wrong credentials apart: filling one table never empties the other.
    private struct Verdicts {
        var granted: [String: Verdict] = [:]
        var refused: [String: Verdict] = [:]
    }

    /// A check queued or being hashed, with every request that waits for it.
    private struct Pending {
        let job: Job
        var completions: [@Sendable (Outcome) -> Void]
    }

    private struct Waiting {
        var queue: FairQueue<ClientAddress, Identity>
        /// By ``Job/identity``, from the time it is queued until its verdict is out.
        var checks: [Identity: Pending] = [:]
    }

    private let verdicts = Locked(Verdicts())
    private let waiting: Locked<Waiting>
    private let worker = BlockingWorker(name: "larder-auth")
    private let tableLimit: Int
    static let rememberFor: UInt64 = 300_000_000_000
    /// Checks queued in all beyond which a client holding fewer is let in by taking the newest
    /// of the client holding the most; one client queues ``perClientBacklog`` at most (more
    /// are refused with 503).
    static let backlogLimit = 256
    static let perClientBacklog = 16

    /// `tableLimit`: verdicts remembered of each kind (right, wrong) before the expired, then
    /// all of that kind, are forgotten.
    init(tableLimit: Int = 4096) {
        self.tableLimit = tableLimit
        waiting = Locked(
            Waiting(queue: FairQueue(perClient: ProxyAuthenticator.perClientBacklog, total: ProxyAuthenticator.backlogLimit)))
    }

    /// What to do with a request carrying `values` (every Proxy-Authorization field line).
    func check(_ values: [String], users: [ProxyUser], now: UInt64) -> Check {
        guard let header = values.first else { return .denied(reason: "no Proxy-Authorization") }
        guard values.count == 1 else { return .denied(reason: "more than one Proxy-Authorization") }
        guard let credentials = BasicCredentials(header: header) else {
            return .denied(reason: "Proxy-Authorization is not valid Basic credentials")
        }
        // No user name is longer (the configuration refuses one), and crypt(3) refuses longer
        // passwords: answered at once for every user alike, and never kept in the tables.
        guard credentials.user.utf8.count <= ProxyUser.maxNameBytes, credentials.password.utf8.count <= PasswordHash.maxPasswordBytes
        else { return .denied(reason: "credentials longer than any user name or password") }
        let user = users.first(where: { $0.name == credentials.user })
        let hash = user?.passwordHash ?? users[0].passwordHash
        // The user name has no colon (RFC 7617 §2: the first one ends it).
        let key = credentials.user + ":" + credentials.password
        let (granted, refused) = verdicts.withLock { ($0.granted[key], $0.refused[key]) }
        if user != nil, let granted, granted.hash == hash, now < granted.expires {
            return .allowed(User(name: credentials.user, hash: hash))
        }
        // Wrong names are remembered as wrong passwords are, against the hash they were checked
        // with: answered as fast, they do not tell which names exist (review 120 F4).
        if let refused, refused.hash == hash, now < refused.expires {
            return .denied(reason: "wrong user name or password for '\(credentials.user)'")
        }
        return .verify(
            Job(key: key, user: credentials.user, password: credentials.password, hash: hash, userExists: user != nil))
    }

    /// Whether `user` is still let in under `users` (the configuration now): its hash
    /// unchanged, or authentication off.
    static func isCurrent(_ user: User?, users: [ProxyUser]) -> Bool {
        guard !users.isEmpty else { return true }
        guard let user else { return false }
        return users.contains { $0.name == user.name && $0.passwordHash == user.hash }
    }

    /// Whether `job` was checked against what `users` (the configuration now) would check it
    /// against: false after a reload changed or removed its user, or turned authentication off.
    static func isCurrent(_ job: Job, users: [ProxyUser]) -> Bool {
        guard let first = users.first else { return false }
        let user = users.first(where: { $0.name == job.user })
        return job.userExists == (user != nil) && job.hash == (user ?? first).passwordHash
    }

    /// Queues `job` for `client`'s request; `completion` is called (on the authenticator's
    /// thread, or on the caller's for a check another client's took the place of) with the
    /// outcome. Returns false, calling nothing, when the client has its share queued, or
    /// every client as few as it would.
    func verify(_ job: Job, client: ClientAddress, completion: @escaping @Sendable (Outcome) -> Void) -> Bool {
        let identity = job.identity
        let admitted: (Bool, Pending?) = waiting.withLock { state in
            if state.checks[identity] != nil {
                state.checks[identity]?.completions.append(completion)
                return (true, nil)
            }
            var pushedOut: Pending?
            switch state.queue.add(identity, for: client) {
            case .refused: return (false, nil)
            case .queued: break
            case .queuedPushingOut(let key): pushedOut = state.checks.removeValue(forKey: key)
            }
            state.checks[identity] = Pending(job: job, completions: [completion])
            return (true, pushedOut)
        }
        guard admitted.0 else { return false }
        for completion in admitted.1?.completions ?? [] { completion(.busy) }
        worker.submit { [self] in verifyNext() }
        return true
    }

    /// Hashes the next check in turn (worker thread), remembers its verdict, and answers every
    /// request waiting for it.
    private func verifyNext() {
        guard let pending = waiting.withLock({ state in state.queue.take().flatMap { state.checks[$0] } }) else { return }
        let job = pending.job
        let valid = PasswordHash.verify(password: job.password, hash: job.hash) && job.userExists
        let verdict = Verdict(hash: job.hash, expires: Clocks.monotonicNanos() &+ ProxyAuthenticator.rememberFor)
        let limit = tableLimit
        verdicts.withLock { tables in
            if valid {
                Self.remember(verdict, for: job.key, in: &tables.granted, limit: limit)
                tables.refused.removeValue(forKey: job.key)
            } else {
                Self.remember(verdict, for: job.key, in: &tables.refused, limit: limit)
                tables.granted.removeValue(forKey: job.key)
            }
        }
        let completions = waiting.withLock { $0.checks.removeValue(forKey: job.identity)?.completions } ?? []
        for completion in completions { completion(valid ? .valid : .invalid) }
    }

    private static func remember(_ verdict: Verdict, for key: String, in table: inout [String: Verdict], limit: Int) {
        if table.count >= limit, table[key] == nil {
            let now = Clocks.monotonicNanos()
            table = table.filter { now < $0.value.expires }
            if table.count >= limit { table.removeAll(keepingCapacity: true) }
        }
        table[key] = verdict
    }

    /// Runs `job` on the hashing thread after the checks submitted before it (tests hold the
    /// thread with it to queue checks deterministically).
    func runOnWorker(_ job: @escaping @Sendable () -> Void) { worker.submit(job) }

    /// Forgets every wrong verdict (a reload changed the users). Wrong user names are
    /// remembered against the first user's hash, wrong passwords against their user's: a
    /// reload that changes one of those would make some second tries slow again and others
    /// not, telling which names exist (review 121 F2). After it, every first try is hashed.
    func forgetRefused() { verdicts.withLock { $0.refused.removeAll() } }

    /// Whether credentials `key` have a verdict remembered (tests).
    func remembers(_ key: String) -> Bool { verdicts.withLock { $0.granted[key] != nil || $0.refused[key] != nil } }

    func stop() { worker.stop() }
}

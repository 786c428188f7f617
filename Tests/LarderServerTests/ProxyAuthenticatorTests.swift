import Foundation
import LarderConfig
import LarderHTTP
import LarderIO
import Synchronization
import Testing

@testable import LarderServer

/// Review 117 F1: one client sending wrong passwords locked every user out (a queue of checks
/// shared first come, first served, and a table of verdicts emptied by the flood). Hashes
/// here are sha512crypt at its fewest rounds, so that hundreds of checks take a second.
@Suite(.timeLimit(.minutes(1))) struct ProxyAuthenticatorTests {
    static func user(_ name: String, _ password: String) throws -> ProxyUser {
        ProxyUser(name: name, passwordHash: try PasswordHash.make(password: password, prefix: "$6$", cost: 1000))
    }

    static func header(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    /// Runs `job` for `client` and waits (10 s at most) for its outcome.
    static func verify(_ authenticator: ProxyAuthenticator, _ check: ProxyAuthenticator.Check, client: UInt8 = 1) -> ProxyAuthenticator
        .Outcome?
    {
        guard case .verify(let job) = check else { return nil }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<ProxyAuthenticator.Outcome?>(nil)
        let queued = authenticator.verify(job, client: Self.client(client)) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard queued, done.wait(timeout: .now() + 10) == .success else { return nil }
        return outcome.withLock { $0 }
    }

    static func client(_ last: UInt8) -> ClientAddress {
        ClientAddress(words: (0, 0xffff_7f00_0000 | UInt64(last)))
    }

    /// A user's remembered verdict outlives any number of wrong passwords, which fill a table
    /// of their own.
    @Test func wrongPasswordsNeverEvictAUsersVerdict() throws {
        let users = [try Self.user("alice", "right")]
        let authenticator = ProxyAuthenticator(tableLimit: 8)
        defer { authenticator.stop() }
        let alice = [Self.header("alice", "right")]
        #expect(Self.verify(authenticator, authenticator.check(alice, users: users, now: Clocks.monotonicNanos())) == .valid)
        guard case .allowed = authenticator.check(alice, users: users, now: Clocks.monotonicNanos()) else {
            Issue.record("a verdict is remembered")
            return
        }
        for index in 0..<40 {
            let wrong = [Self.header("alice", "wrong \(index)")]
            #expect(
                Self.verify(authenticator, authenticator.check(wrong, users: users, now: Clocks.monotonicNanos()), client: 2) == .invalid)
        }
        guard case .allowed = authenticator.check(alice, users: users, now: Clocks.monotonicNanos()) else {
            Issue.record("40 wrong passwords (five times the table) emptied the user's verdict")
            return
        }
        // Spellings of one header are one entry.
        guard
            case .allowed = authenticator.check(
                ["bAsIc   " + Self.header("alice", "right").dropFirst(6)], users: users, now: Clocks.monotonicNanos())
        else {
            Issue.record("the verdict is the credentials', not the header's")
            return
        }
    }

    /// Holds the hashing thread until the returned semaphore is signalled, so that what the
    /// test queues meanwhile stays queued.
    static func holdWorker(_ authenticator: ProxyAuthenticator) -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        authenticator.runOnWorker { gate.wait() }
        return gate
    }

    /// A client holds its share of the queue at most: a flood of checks is refused past it,
    /// and another client's check is taken next in turn, not after the flood. Requests with the
    /// same credentials share one check.
    @Test func aFloodOfChecksHoldsOnlyItsClientsShare() throws {
        let users = [try Self.user("alice", "right"), try Self.user("bob", "right")]
        let authenticator = ProxyAuthenticator()
        defer { authenticator.stop() }
        let gate = Self.holdWorker(authenticator)
        let order = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        var queued = 0
        var refused = 0
        for index in 0..<(3 * ProxyAuthenticator.perClientBacklog) {
            guard case .verify(let job) = authenticator.check([Self.header("alice", "flood \(index)")], users: users, now: 0) else {
                Issue.record("a new password is checked")
                gate.signal()
                return
            }
            if authenticator.verify(
                job, client: Self.client(2),
                completion: { _ in
                    order.withLock { $0.append("flood") }
                    done.signal()
                })
            {
                queued += 1
            } else {
                refused += 1
            }
        }
        #expect(queued == ProxyAuthenticator.perClientBacklog, "its share")
        #expect(refused == 2 * ProxyAuthenticator.perClientBacklog)
        guard case .verify(let bob) = authenticator.check([Self.header("bob", "right")], users: users, now: 0) else {
            Issue.record("bob's credentials are checked")
            gate.signal()
            return
        }
        // Twenty requests of bob's, more than a client's share, all wait for one check.
        var bobs = 0
        for _ in 0..<20 {
            if authenticator.verify(
                bob, client: Self.client(1),
                completion: { outcome in
                    order.withLock { $0.append(outcome == .valid ? "bob" : "bob refused") }
                    done.signal()
                })
            {
                bobs += 1
            }
        }
        #expect(bobs == 20, "the same credentials share one check")
        gate.signal()
        for _ in 0..<(queued + bobs) { #expect(done.wait(timeout: .now() + 10) == .success) }
        let finished = order.withLock { $0 }
        #expect(finished.firstIndex(of: "bob") == 1, "bob's check went in turn, after one of the flood's: \(finished)")
        #expect(finished.filter { $0 == "bob" }.count == 20)
    }

    /// Review 119 F2: a request made after a reload changed the user's password waited for the
    /// check of the same credentials queued before it, made against the old hash, and took its
    /// verdict. Checks are shared only when the hash is the same too.
    @Test func aCheckAgainstAnOldHashIsNotShared() throws {
        let before = [try Self.user("alice", "old")]
        let after = [try Self.user("alice", "new")]
        let authenticator = ProxyAuthenticator()
        defer { authenticator.stop() }
        let gate = Self.holdWorker(authenticator)
        let outcomes = Mutex<[String: ProxyAuthenticator.Outcome]>([:])
        let done = DispatchSemaphore(value: 0)
        let alice = [Self.header("alice", "old")]
        for (name, users) in [("before", before), ("after", after)] {
            guard case .verify(let job) = authenticator.check(alice, users: users, now: 0) else {
                Issue.record("alice's credentials are checked")
                gate.signal()
                return
            }
            let queued = authenticator.verify(job, client: Self.client(1)) { outcome in
                outcomes.withLock { $0[name] = outcome }
                done.signal()
            }
            #expect(queued)
        }
        gate.signal()
        for _ in 0..<2 { #expect(done.wait(timeout: .now() + 10) == .success) }
        let seen = outcomes.withLock { $0 }
        #expect(seen["before"] == .valid)
        #expect(seen["after"] == .invalid, "the password the reload replaced is refused")
        guard case .denied = authenticator.check(alice, users: after, now: 0) else {
            Issue.record("the remembered verdict is the one made against the new hash")
            return
        }
    }

    /// Review 120 F4: a wrong password of a user was remembered, a wrong user name hashed again
    /// every time, so the time of a second try told which names exist. Both are remembered.
    @Test func wrongUserNamesAreRememberedAsWrongPasswordsAre() throws {
        let users = [try Self.user("alice", "right")]
        let authenticator = ProxyAuthenticator()
        defer { authenticator.stop() }
        for name in ["alice", "nobody"] {
            let header = [Self.header(name, "wrong")]
            #expect(Self.verify(authenticator, authenticator.check(header, users: users, now: 0)) == .invalid)
            guard case .denied = authenticator.check(header, users: users, now: 0) else {
                Issue.record("the second try of '\(name)' is answered from the table")
                return
            }
        }
        // Once the name exists, its verdict is made anew against its own hash.
        let later = users + [try Self.user("nobody", "wrong")]
        #expect(Self.verify(authenticator, authenticator.check([Self.header("nobody", "wrong")], users: later, now: 0)) == .valid)
    }

    /// Review 120 F5: credentials of 12 KiB were kept whole in the tables, 4096 of them.
    /// Longer than any user name or password can be, they are refused at once and not kept.
    @Test func credentialsLongerThanAnyUsersAreRefusedAtOnce() throws {
        let users = [try Self.user("alice", "right")]
        let authenticator = ProxyAuthenticator()
        defer { authenticator.stop() }
        let long = String(repeating: "x", count: PasswordHash.maxPasswordBytes + 1)
        for (name, password) in [("alice", long), (String(repeating: "a", count: ProxyUser.maxNameBytes + 1), "right")] {
            guard case .denied = authenticator.check([Self.header(name, password)], users: users, now: 0) else {
                Issue.record("credentials of \(name.count + password.count) bytes are refused at once")
                return
            }
            #expect(!authenticator.remembers(name + ":" + password))
        }
        // The longest password crypt(3) takes is still checked.
        let longest = String(repeating: "y", count: PasswordHash.maxPasswordBytes)
        guard case .verify = authenticator.check([Self.header("alice", longest)], users: users, now: 0) else {
            Issue.record("a password of \(PasswordHash.maxPasswordBytes) bytes is checked")
            return
        }
    }
}

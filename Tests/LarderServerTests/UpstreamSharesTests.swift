import LarderIO
import Testing

@testable import LarderServer

/// Each client's share of an origin's connections on a loop: who counts as one client, and
/// the order in which its waiting requests go on.
@Suite struct UpstreamSharesTests {
    /// A client is its address: an IPv4 client on a dual-stack socket is that IPv4 client, and
    /// IPv6 clients of one LAN (one /64) are each their own.
    @Test func aClientIsItsWholeAddress() throws {
        let v4 = try #require(UpstreamShares.client(SocketAddress(ipBytes: [10, 0, 0, 7], port: 5000)))
        let mappedBytes: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7]
        let mapped = try #require(UpstreamShares.client(SocketAddress(ipBytes: mappedBytes, port: 6000)))
        #expect(v4 == mapped, "an IPv4 client on a dual-stack socket is the same client")
        let net: [UInt8] = [0x20, 0x01, 0xd, 0xb8, 0, 1, 0, 2]
        let first = try #require(UpstreamShares.client(SocketAddress(ipBytes: net + [1, 2, 3, 4, 5, 6, 7, 8], port: 1)))
        let again = try #require(UpstreamShares.client(SocketAddress(ipBytes: net + [1, 2, 3, 4, 5, 6, 7, 8], port: 2)))
        let neighbour = try #require(UpstreamShares.client(SocketAddress(ipBytes: net + [9, 9, 9, 9, 9, 9, 9, 9], port: 1)))
        #expect(first == again && first != neighbour, "hosts of one /64 are not one client")
        #expect(first != v4)
        #expect(UpstreamShares.client(nil) == nil)
        // A log names the client as its address, whatever socket it came on.
        func named(_ client: (high: UInt64, low: UInt64)) -> String {
            UpstreamShares.Key(client: client, host: "origin", port: 80).clientAddress
        }
        #expect(named(v4) == "10.0.0.7" && named(mapped) == "10.0.0.7")
        #expect(named(first) == "2001:db8:1:2:102:304:506:708")
        let loopback = try #require(UpstreamShares.client(SocketAddress(ipBytes: Array(repeating: 0, count: 15) + [1], port: 1)))
        #expect(named(loopback) == "::1")
    }

    @Test func aRequestWaitsForItsClientsShareOrForAFreeConnection() {
        #expect(UpstreamShares.limit(perHost: 32) == 16 && UpstreamShares.limit(perHost: 1) == 1 && UpstreamShares.limit(perHost: 3) == 1)
        var shares = UpstreamShares()
        let key = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let other = UpstreamShares.Key(client: (0, 2), host: "example.org", port: 80)
        let elsewhere = UpstreamShares.Key(client: (0, 2), host: "example.net", port: 80)
        #expect(shares.count(key) == 0 && shares.mustWait(key, share: 2, perHost: 4) == nil)
        shares.take(key)
        shares.take(key)
        #expect(shares.mustWait(key, share: 2, perHost: 4) == .clientShare)
        #expect(shares.mustWait(other, share: 2, perHost: 4) == nil, "another client keeps its own share")
        shares.take(other)
        shares.take(other)
        #expect(shares.mustWait(UpstreamShares.Key(client: (0, 3), host: "example.org", port: 80), share: 2, perHost: 4) == .originFull)
        #expect(shares.mustWait(elsewhere, share: 2, perHost: 4) == nil, "another origin's connections")
        #expect(shares.inFlight(target: key.target) == 4 && shares.inFlight(target: elsewhere.target) == 0)
    }

    /// A connection freed goes to the waiting request whose client holds the fewest fills to
    /// the origin (the oldest of those), never to one whose client is at its share, and to
    /// none while every connection is taken.
    /// A connection given back while requests wait is theirs: until the loop's pass lets them
    /// go on, a request arriving meanwhile (one that joined a cut transfer and goes on, say)
    /// waits behind them, though the origin has room.
    @Test func aConnectionGivenBackGoesToTheRequestsThatWaited() {
        var shares = UpstreamShares()
        let holder = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let waiter = UpstreamShares.Key(client: (0, 2), host: "example.org", port: 80)
        let newcomer = UpstreamShares.Key(client: (0, 3), host: "example.org", port: 80)
        let elsewhere = UpstreamShares.Key(client: (0, 3), host: "example.net", port: 80)
        for _ in 0..<2 { shares.take(holder) }
        #expect(shares.mustWait(waiter, share: 1, perHost: 2) == .originFull)
        var resumed = 0
        shares.wait(waiter, now: 0, until: 100) {
            resumed += 1
            return true
        }
        let waited = shares.give(holder)
        #expect(waited, "a request waits for the origin")
        #expect(shares.mayBeAtLimit(1))
        #expect(shares.mustWait(newcomer, share: 1, perHost: 2) == .originFull, "the freed connection is the waiter's")
        #expect(shares.mustWait(elsewhere, share: 1, perHost: 2) == nil, "another origin's")
        shares.handedOver(target: waiter.target)
        #expect(shares.mustWait(newcomer, share: 1, perHost: 2) == nil, "once the waiters were let go on")
        let next = shares.nextWaiting(target: waiter.target, share: 1, perHost: 2)
        #expect(next?() == true && resumed == 1)
        let again = shares.give(holder)
        #expect(!again, "no one waits: nothing handed over")
        #expect(shares.mustWait(newcomer, share: 1, perHost: 2) == nil)
        // A waiter its own share holds back takes nothing freed: a newcomer is not held back.
        var busy = UpstreamShares()
        for _ in 0..<2 { busy.take(holder) }
        busy.take(waiter)
        busy.wait(waiter, now: 0, until: 100) { true }
        let freed = busy.give(holder)
        #expect(freed && busy.mustWait(waiter, share: 1, perHost: 4) == .clientShare)
        #expect(busy.mustWait(newcomer, share: 1, perHost: 4) == nil, "the waiter cannot take it")
    }

    @Test func aFreedConnectionGoesToTheClientHoldingTheFewest() {
        var shares = UpstreamShares()
        let origin = "example.org"
        let busy = UpstreamShares.Key(client: (0, 1), host: origin, port: 80)
        let some = UpstreamShares.Key(client: (0, 2), host: origin, port: 80)
        let none = UpstreamShares.Key(client: (0, 3), host: origin, port: 80)
        let target = busy.target
        for key in [busy, busy, some, some] { shares.take(key) }
        var ran: [String] = []
        func park(_ key: UpstreamShares.Key, _ name: String) {
            shares.wait(key, now: 0, until: .max) {
                ran.append(name)
                return true
            }
        }
        park(busy, "busy")
        park(some, "some-1")
        park(none, "none")
        park(some, "some-2")
        #expect(shares.waiters(target: target) == 4 && shares.eligibleWaiters(target: target, share: 2) == 0 + 1)
        let whileFull = shares.nextWaiting(target: target, share: 2, perHost: 4)
        #expect(whileFull == nil, "every connection taken")
        let waited = shares.give(some)
        #expect(waited, "requests wait for the origin")
        // Review 75 F1: of the client holding one (two queued), one more may go.
        #expect(shares.eligibleWaiters(target: target, share: 2) == 1 + 1, "the busy client is at its share")
        shares.nextWaiting(target: target, share: 2, perHost: 4).map { _ = $0() }
        #expect(ran == ["none"], "the client holding none goes first, though it came later")
        shares.take(none)
        let full = shares.nextWaiting(target: target, share: 2, perHost: 4)
        #expect(full == nil)
        _ = shares.give(none)
        shares.nextWaiting(target: target, share: 2, perHost: 4).map { _ = $0() }
        #expect(ran == ["none", "some-1"], "then the oldest of those holding one; never the busy one")
        shares.take(some)
        _ = shares.give(busy)
        _ = shares.give(busy)
        shares.nextWaiting(target: target, share: 2, perHost: 4).map { _ = $0() }
        #expect(ran == ["none", "some-1", "busy"], "the busy client, down to none, now holds the fewest")
        shares.take(busy)
        let blocked = shares.nextWaiting(target: target, share: 2, perHost: 4)
        #expect(blocked == nil, "a connection is free, but the last one's client is at its share")
        _ = shares.give(some)
        shares.nextWaiting(target: target, share: 2, perHost: 4).map { _ = $0() }
        #expect(ran.last == "some-2" && shares.waiters(target: target) == 0)
        let waitedAgain = shares.give(some)
        #expect(!waitedAgain && shares.count(some) == 0)
    }

    /// A wait that ends otherwise than by its turn (timed out, its client gone) leaves the
    /// list at once, and takes nothing else with it.
    @Test func aWaitThatEndsIsTakenOffTheList() {
        var shares = UpstreamShares()
        let key = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let other = UpstreamShares.Key(client: (0, 2), host: "example.org", port: 80)
        shares.take(key)
        var ran: [UInt64] = []
        var ids: [UInt64] = []
        for _ in 0..<3 {
            let slot = UncheckedCounter()
            ids.append(
                shares.wait(key, now: 0, until: .max) {
                    ran.append(slot.value)
                    return true
                })
            slot.value = ids.last!
        }
        let otherID = shares.wait(other, now: 0, until: .max) { true }
        #expect(shares.waiters(target: key.target) == 4 && ids == ids.sorted())
        shares.cancelWait(key, id: ids[1])
        shares.cancelWait(key, id: ids[1])  // once only
        shares.cancelWait(other, id: otherID)
        #expect(shares.waiters(target: key.target) == 2 && shares.isWaitedFor(target: key.target))
        _ = shares.give(key)
        while let next = shares.nextWaiting(target: key.target, share: 1, perHost: 4) {
            _ = next()
            shares.take(key)  // it took its client's share
        }
        #expect(ran == [ids[0]], "its client's share holds the third back")
        shares.cancelWait(key, id: ids[2])
        #expect(!shares.isWaitedFor(target: key.target) && shares.waiters(target: key.target) == 0)
    }

    final class UncheckedCounter {
        var value: UInt64 = 0
    }

    /// How long the waiting clients have waited and what they hold decides whether a running
    /// transfer is cut for them: the fewest held among clients whose oldest request waited
    /// since the time asked, below their share.
    @Test func theFewestHeldByAClientWaitingSinceLongEnough() {
        var shares = UpstreamShares()
        let early = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let late = UpstreamShares.Key(client: (0, 2), host: "example.org", port: 80)
        let full = UpstreamShares.Key(client: (0, 3), host: "example.org", port: 80)
        for _ in 0..<2 { shares.take(early) }
        for _ in 0..<3 { shares.take(full) }
        shares.wait(early, now: 100, until: .max) { true }
        shares.wait(late, now: 500, until: .max) { true }
        shares.wait(full, now: 50, until: .max) { true }
        #expect(shares.fewestHeld(waitingSince: 99, target: early.target, share: 3) == nil, "no one waited that long")
        #expect(shares.fewestHeld(waitingSince: 100, target: early.target, share: 3) == 2, "the client at its share does not count")
        #expect(shares.fewestHeld(waitingSince: 500, target: early.target, share: 3) == 0)
        let elsewhere = UpstreamShares.Key(client: (0, 1), host: "example.net", port: 80)
        #expect(shares.fewestHeld(waitingSince: 500, target: elsewhere.target, share: 3) == nil)
    }

    /// A wait that reaches its end is taken off its list and its time-out handed back to run;
    /// the others stay, in their order.
    @Test func aWaitThatReachesItsEndIsTimedOut() {
        var shares = UpstreamShares()
        let key = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let other = UpstreamShares.Key(client: (0, 2), host: "example.net", port: 80)
        var timedOut: [String] = []
        shares.wait(key, now: 0, until: 100, resume: { true }, timeOut: { timedOut.append("first") })
        shares.wait(key, now: 0, until: 300, resume: { true }, timeOut: { timedOut.append("second") })
        shares.wait(other, now: 0, until: 100, resume: { true }, timeOut: { timedOut.append("other") })
        #expect(shares.expired(now: 99).isEmpty)
        for timeOut in shares.expired(now: 100) { timeOut() }
        #expect(timedOut.sorted() == ["first", "other"])
        #expect(shares.waiters(target: key.target) == 1 && !shares.isWaitedFor(target: other.target))
        for timeOut in shares.expired(now: 300) { timeOut() }
        #expect(timedOut.count == 3 && shares.waitingTargets.isEmpty)
    }
}

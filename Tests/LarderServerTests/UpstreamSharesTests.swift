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
    }

    @Test func theShareIsHalfTheOriginsConnectionsAndWaitersGoOnInOrder() {
        #expect(UpstreamShares.limit(perHost: 32) == 16 && UpstreamShares.limit(perHost: 1) == 1 && UpstreamShares.limit(perHost: 3) == 1)
        var shares = UpstreamShares()
        let key = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
        let other = UpstreamShares.Key(client: (0, 2), host: "example.org", port: 80)
        #expect(shares.count(key) == 0 && !shares.isAtLimit(key, limit: 2))
        shares.take(key)
        shares.take(key)
        #expect(shares.isAtLimit(key, limit: 2) && !shares.isAtLimit(other, limit: 2), "another client keeps its own share")
        var ran: [Int] = []
        shares.wait(key) {
            ran.append(1)
            return true
        }
        shares.wait(key) {
            ran.append(2)
            return true
        }
        #expect(shares.waiters(key) == 2)
        let waited = shares.give(key)
        #expect(waited, "one of its fills ended: requests wait")
        while !shares.isAtLimit(key, limit: 2), let next = shares.nextWaiting(key) {
            _ = next()
            if ran.count == 1 { shares.take(key) }  // the first took the share
        }
        #expect(ran == [1] && shares.waiters(key) == 1 && shares.count(key) == 2)
        _ = shares.give(key)
        _ = shares.give(key)
        #expect(shares.count(key) == 0)
        _ = shares.nextWaiting(key).map { $0() }
        let waitedAgain = shares.give(key)
        #expect(ran == [1, 2] && shares.waiters(key) == 0 && !waitedAgain && shares.count(key) == 0 && !shares.mayBeAtLimit(1))
    }
}

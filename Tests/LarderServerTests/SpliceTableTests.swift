import Testing

@testable import LarderServer

/// Splices per (client address, host) pair, over an explicit clock.
@Suite struct SpliceTableTests {
    let second: UInt64 = 1_000_000_000

    @Test func refusalsFromOneClientSpliceThatClientOnly() {
        var table = SpliceTable(capacity: 16)
        for index in 0..<2 {
            let started = table.record(
                client: "127.0.0.2", host: "a.test", refusal: "rejected", threshold: 3, spliceFor: 60 * second, now: UInt64(index) * second)
            #expect(!started)
        }
        let twoRefusals = table.admits(client: "127.0.0.2", host: "a.test", now: 2 * second)
        #expect(twoRefusals)
        let started = table.record(
            client: "127.0.0.2", host: "a.test", refusal: "rejected", threshold: 3, spliceFor: 60 * second, now: 2 * second)
        #expect(started)
        let third = table.admits(client: "127.0.0.2", host: "a.test", now: 3 * second)
        #expect(!third)
        let otherClient = table.admits(client: "127.0.0.1", host: "a.test", now: 3 * second)
        #expect(otherClient, "another client of the host")
        let otherHost = table.admits(client: "127.0.0.2", host: "b.test", now: 3 * second)
        #expect(otherHost, "another host of the client")
        #expect(table.splicedHosts(now: 3 * second) == ["a.test": 1])
        let spliced = table.spliced(now: 3 * second)
        #expect(spliced.count == 1 && spliced.first?.until == 62 * second && spliced.first?.entry.failures == 3)
        let afterwards = table.admits(client: "127.0.0.2", host: "a.test", now: 62 * second)
        #expect(afterwards, "runs out")
        #expect(table.entries.isEmpty, "and starts over")
    }

    @Test func aSuccessClearsTheClientsCountAndItsEntry() {
        var table = SpliceTable(capacity: 16)
        _ = table.record(client: "c", host: "h", refusal: "x", threshold: 2, spliceFor: second, now: 0)
        _ = table.record(client: "c", host: "h", refusal: nil, threshold: 2, spliceFor: second, now: 0)
        #expect(table.entries.isEmpty)
        let startedAgain = table.record(client: "c", host: "h", refusal: "x", threshold: 2, spliceFor: second, now: 0)
        #expect(!startedAgain, "the count started over")
        let successElsewhere = table.record(client: "other", host: "h", refusal: nil, threshold: 2, spliceFor: second, now: 0)
        #expect(!successElsewhere)
        #expect(table.entries.count == 1, "a success with nothing to clear makes no entry")
    }

    @Test func clearingEndsAHostsSplicesOrOneClients() {
        var table = SpliceTable(capacity: 16)
        for client in ["a", "b"] {
            _ = table.record(client: client, host: "h", refusal: "x", threshold: 1, spliceFor: 60 * second, now: 0)
        }
        _ = table.record(client: "a", host: "other", refusal: "x", threshold: 1, spliceFor: 60 * second, now: 0)
        let clearedOne = table.clear(host: "h", client: "b")
        #expect(clearedOne == 1)
        let bAdmitted = table.admits(client: "b", host: "h", now: second)
        let aStillSpliced = !table.admits(client: "a", host: "h", now: second)
        #expect(bAdmitted && aStillSpliced)
        let clearedHost = table.clear(host: "h", client: nil)
        #expect(clearedHost == 1)
        let aAdmitted = table.admits(client: "a", host: "h", now: second)
        #expect(aAdmitted)
        let otherHostAdmitted = table.admits(client: "a", host: "other", now: second)
        #expect(!otherHostAdmitted, "other hosts untouched")
    }

    @Test func manyClientsCannotGrowTheTablePastItsCapacityAndSplicesOutliveCounts() {
        var table = SpliceTable(capacity: 8)
        _ = table.record(client: "spliced", host: "h", refusal: "x", threshold: 1, spliceFor: 3600 * second, now: 0)
        for index in 0..<1000 {
            _ = table.record(
                client: "10.0.\(index / 256).\(index % 256)", host: "h", refusal: "x", threshold: 3, spliceFor: second,
                now: UInt64(index + 1))
        }
        #expect(table.entries.count == 8)
        let splicedAdmitted = table.admits(client: "spliced", host: "h", now: 2000)
        #expect(!splicedAdmitted, "the oldest not spliced made room first")
        #expect(table.entries[.init(client: "10.0.3.231", host: "h")] != nil, "the newest stays")
    }

    /// Issue 57: one address refusing the certificate for many names under a wildcard entry
    /// (`*.example`) used to fill the table and push out the oldest pairs of everyone, so
    /// another client's count never reached its splice (it stayed locked out) or its splice
    /// ended early.
    @Test func oneClientRefusingForManyHostsEvictsOnlyItsOwnPairs() {
        var table = SpliceTable(capacity: 16, addressCapacity: 4)
        let spliced = table.record(client: "127.0.0.4", host: "h", refusal: "x", threshold: 1, spliceFor: 3600 * second, now: 0)
        #expect(spliced)
        for index in 0..<2 {
            _ = table.record(client: "127.0.0.2", host: "h", refusal: "x", threshold: 3, spliceFor: 60 * second, now: UInt64(index))
        }
        for index in 0..<1000 {
            _ = table.record(
                client: "127.0.0.3", host: "x\(index).h", refusal: "x", threshold: 1, spliceFor: 3600 * second, now: UInt64(10 + index))
        }
        #expect(table.entriesByAddress["127.0.0.3"]?.count == 4, "its own cap")
        let started = table.record(client: "127.0.0.2", host: "h", refusal: "x", threshold: 3, spliceFor: 60 * second, now: 2000)
        #expect(started, "the third refusal of 127.0.0.2 splices it: its first two were kept")
        let stillSpliced = !table.admits(client: "127.0.0.4", host: "h", now: 2001)
        #expect(stillSpliced, "127.0.0.4's splice outlived the flood")
        let newest = !table.admits(client: "127.0.0.3", host: "x999.h", now: 2001)
        #expect(newest, "the flood keeps its newest pairs")
    }

    @Test func whenTheTableIsFullTheAddressWithTheMostPairsMakesRoom() {
        var table = SpliceTable(capacity: 16, addressCapacity: 4)
        _ = table.record(client: "192.0.2.1", host: "h", refusal: "x", threshold: 3, spliceFor: second, now: 0)
        for index in 0..<200 {
            _ = table.record(
                client: "127.0.0.\(index % 8 + 10)", host: "x\(index).h", refusal: "x", threshold: 3, spliceFor: second,
                now: UInt64(1 + index))
        }
        #expect(table.entries.count == 16)
        #expect(table.entriesByAddress["192.0.2.1"]?.count == 1, "the lone pair, the oldest, stayed")
    }

    /// Many addresses of one IPv6 /64 (one host may use them all) fill a full table at the
    /// expense of that /64 only: not of IPv4 clients, nor of other prefixes.
    @Test func aFloodFromManyAddressesOfOneSlash64EvictsOnlyPairsOfThatSlash64() {
        #expect(SpliceTable.prefix(of: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(SpliceTable.prefix(of: "2001:db8:1:2:bbbb:cccc:dddd:eeee") == "2001:db8:1:2::/64")
        #expect(SpliceTable.prefix(of: "::ffff:127.0.0.2") == "127.0.0.2")
        #expect(SpliceTable.prefix(of: "127.0.0.2") == "127.0.0.2")
        var table = SpliceTable(capacity: 16, addressCapacity: 4)
        _ = table.record(client: "192.0.2.1", host: "h", refusal: "x", threshold: 3, spliceFor: second, now: 0)
        _ = table.record(client: "2001:db8:9::1", host: "h", refusal: "x", threshold: 3, spliceFor: second, now: 1)
        for index in 0..<100 {
            _ = table.record(
                client: "2001:db8:1:2::\(String(index + 1, radix: 16))", host: "h", refusal: "x", threshold: 3, spliceFor: second,
                now: UInt64(2 + index))
        }
        #expect(table.entries.count == 16)
        #expect(table.entriesByAddress["192.0.2.1"]?.count == 1 && table.entriesByAddress["2001:db8:9::1"]?.count == 1)
        #expect(table.entriesByPrefix["2001:db8:1:2::/64"] == 14)
        #expect(table.entriesByAddress["2001:db8:1:2::64"]?.count == 1, "the newest stays")
    }
}

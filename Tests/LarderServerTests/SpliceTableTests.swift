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
}

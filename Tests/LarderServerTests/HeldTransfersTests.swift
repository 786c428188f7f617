import Testing

@testable import LarderServer

/// Which transfer paused for its clients gives its connection up, and when: only while the
/// origin's connections are all taken, only after the hold limit, the busiest client's first.
@Suite struct HeldTransfersTests {
    final class Transfer {}

    let origin = UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80)
    let limit = HeldTransfers<Transfer>.holdLimit

    @Test func noneIsCutWhileTheOriginsConnectionsSuffice() {
        var held = HeldTransfers<Transfer>()
        let transfer = Transfer()
        held.paused(transfer, share: origin, now: 1_000)
        let later = 1_000 + 10 * limit
        let served = held.toCut(target: origin.target, waiting: 1, free: 1, now: later) { _ in 4 }
        #expect(served == nil, "a free connection serves the request that waits")
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: later) { _ in 4 } === transfer)
        let elsewhere = UpstreamShares.Key(client: (0, 1), host: "example.net", port: 80)
        #expect(held.toCut(target: elsewhere.target, waiting: 1, free: 0, now: later) { _ in 4 } == nil, "another origin's wait")
    }

    @Test func aTransferIsCutOnlyOnceItHasWaitedTheLimitForItsClients() {
        var held = HeldTransfers<Transfer>()
        let transfer = Transfer()
        held.paused(transfer, share: origin, now: 1_000)
        held.paused(transfer, share: origin, now: 1_000 + limit)  // already listed: the first pause counts
        #expect(held.entries[origin.target]?.count == 1)
        #expect(held.toCut(target: origin.target, waiting: 5, free: 0, now: 1_000 + limit - 1) { _ in 1 } == nil)
        #expect(held.toCut(target: origin.target, waiting: 5, free: 0, now: 1_000 + limit) { _ in 1 } === transfer)
        held.resumed(transfer, target: origin.target)
        #expect(held.isEmpty)
        #expect(held.toCut(target: origin.target, waiting: 5, free: 0, now: 1_000 + 2 * limit) { _ in 1 } == nil, "resumed")
    }

    /// A client with several addresses holds the most through one of them, and the longest
    /// waiting of those goes first; a client with one slow download is cut last.
    @Test func theClientHoldingTheMostIsCutFirstThenTheLongestPaused() {
        var held = HeldTransfers<Transfer>()
        let lone = UpstreamShares.Key(client: (0, 7), host: "example.org", port: 80)
        let busy = UpstreamShares.Key(client: (0, 8), host: "example.org", port: 80)
        let victim = Transfer()
        let newer = Transfer()
        let older = Transfer()
        held.paused(victim, share: lone, now: 0)
        held.paused(newer, share: busy, now: 200)
        held.paused(older, share: busy, now: 100)
        let counts = [lone: 1, busy: 3]
        let now = 200 + limit
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: now) { counts[$0] ?? 0 } === older)
        held.resumed(older, target: origin.target)
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: now) { counts[$0] ?? 0 } === newer)
        held.resumed(newer, target: origin.target)
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: now) { counts[$0] ?? 0 } === victim)
    }

    /// Transfers that never pause (they wait for their origin, or store what they fetch): one
    /// that barely moves is cut for a client that waited only if its own client holds at least
    /// two more fills to the origin than the waiting client holding the fewest, and only once
    /// it has run the limit; the busiest client's first, then the one fewest read, then the
    /// newest. One whose body moves is never cut for a share.
    @Test func aRunningTransferIsCutOnlyForAClientHoldingTwoFewer() {
        typealias Running = HeldTransfers<Transfer>.Running
        let busy = UpstreamShares.Key(client: (0, 8), host: "example.org", port: 80)
        let other = UpstreamShares.Key(client: (0, 9), host: "example.org", port: 80)
        let old = Transfer()
        let new = Transfer()
        let joined = Transfer()
        let young = Transfer()
        let otherClients = Transfer()
        let running = [
            Running(holder: old, share: busy, began: 100, readers: 1, received: 0),
            Running(holder: new, share: busy, began: 300, readers: 1, received: 0),
            Running(holder: joined, share: busy, began: 400, readers: 3, received: 0),
            Running(holder: young, share: busy, began: 500, readers: 1, received: 0),
            Running(holder: otherClients, share: other, began: 0, readers: 1, received: 0),
        ]
        var counts = [busy: 4, other: 2]
        let now = 300 + limit
        let held = { (key: UpstreamShares.Key) in counts[key] ?? 0 }
        #expect(
            HeldTransfers.overShare(running, fewest: 0, now: now, held: held) === new,
            "the busiest client's newest of those that ran the limit, read by its client alone")
        #expect(HeldTransfers.overShare(running, fewest: 1, now: now, held: held) === new)
        #expect(HeldTransfers.overShare(running, fewest: 3, now: now, held: held) == nil, "it would hold no more than the waiter")
        #expect(HeldTransfers.overShare(running, fewest: 0, now: 100 + limit - 1, held: held) === otherClients, "the rest too young")
        #expect(HeldTransfers.overShare(running, fewest: 0, now: 99 + limit - 100, held: held) == nil, "none ran the limit")
        #expect(HeldTransfers.overShare(Array(running.prefix(3)), fewest: 0, now: 400 + limit, held: held) === new, "fewest readers first")
        let atRate = Int(HeldTransfers<Transfer>.minimumRate * Double(now - 300) / 1e9)
        let moving = Running(holder: new, share: busy, began: 300, readers: 1, received: atRate + 1)
        let slow = Running(holder: old, share: busy, began: 300, readers: 1, received: atRate - 1)
        #expect(HeldTransfers.overShare([moving], fewest: 0, now: now, held: held) == nil, "its body moves: never cut for a share")
        #expect(HeldTransfers.overShare([moving, slow], fewest: 0, now: now, held: held) === old, "a body that trickles is")
        #expect(HeldTransfers.overShare([moving], fewest: 0, now: now, held: held, anyRate: true) === new, "past the floor: any")
        let faster = Running(holder: young, share: busy, began: 300, readers: 1, received: atRate * 4)
        #expect(HeldTransfers.overShare([faster, moving], fewest: 0, now: now, held: held, anyRate: true) === new, "the slowest first")
        #expect(HeldTransfers<Transfer>.fairnessFloor(timeout: 60_000_000_000) == 30_000_000_000)
        #expect(HeldTransfers<Transfer>.fairnessFloor(timeout: 10_000_000_000) == 15_000_000_000)
        counts = [busy: 2, other: 2]
        #expect(HeldTransfers.overShare(running, fewest: 1, now: now, held: held) == nil, "each holds one more than the waiter: even")
        #expect(HeldTransfers.overShare(running, fewest: 0, now: now, held: held) === new, "a tie of clients: the newest transfer")
    }

    /// The socket's buffers move a slow reader's position in steps longer than the limit: what
    /// its client really received is measured over at least two seconds from a mark, and a
    /// client taking ~100 KiB/s or more is spared; one taking less is cut; one not yet
    /// measured waits for a later look.
    @Test func aPausedTransferWhoseClientStillReceivesIsSpared() {
        var held = HeldTransfers<Transfer>()
        let reading = Transfer()
        let stalled = Transfer()
        held.paused(reading, share: origin, now: 0)
        held.paused(stalled, share: origin, now: 0)
        let span = HeldTransfers<Transfer>.measureSpan
        let perSpan = Int((HeldTransfers<Transfer>.spareRate * Double(span) / 1e9).rounded(.up))
        var received: [ObjectIdentifier: Int] = [ObjectIdentifier(reading): 1_000, ObjectIdentifier(stalled): 5_000]
        func cut(_ waiting: Int, at now: UInt64) -> Transfer? {
            held.measure(target: origin.target, now: now) { received[ObjectIdentifier($0)] }
            return held.toCut(target: origin.target, waiting: waiting, free: 0, now: now) { _ in 1 }
        }
        let first = limit + 1
        #expect(cut(2, at: first) == nil, "marked, not judged")
        received[ObjectIdentifier(reading)] = 1_000 + perSpan
        #expect(cut(2, at: first + span - HeldTransfers<Transfer>.measureInterval) == nil, "too soon")
        #expect(cut(2, at: first + span) === stalled)
        held.resumed(stalled, target: origin.target)
        // Measured from the same mark: the rate falls once it stops taking.
        #expect(cut(1, at: first + 3 * span) === reading, "slowed")
        var unmeasured = HeldTransfers<Transfer>()
        unmeasured.paused(reading, share: origin, now: 0)
        let never = unmeasured.toCut(target: origin.target, waiting: 1, free: 0, now: first) { _ in 1 }
        #expect(never === reading, "never measured: the pause decides")
        unmeasured.measure(target: origin.target, now: first) { _ in nil }
        let unreadable = unmeasured.toCut(target: origin.target, waiting: 1, free: 0, now: first) { _ in 1 }
        #expect(unreadable === reading, "unreadable: the pause decides")
    }

    /// Of the readers too slow to be spared, the slowest is cut first (review 70: one at
    /// 110 KiB/s was cut while two at 80 KiB/s kept their transfers); the client holding the
    /// most still comes before.
    @Test func theSlowestReaderIsCutFirst() {
        var held = HeldTransfers<Transfer>()
        let faster = Transfer()
        let slower = Transfer()
        let stalled = Transfer()
        let busy = UpstreamShares.Key(client: (0, 9), host: "example.org", port: 80)
        held.paused(faster, share: origin, now: 0)
        held.paused(slower, share: origin, now: 10)
        held.paused(stalled, share: busy, now: 20)
        let start = limit
        let span = HeldTransfers<Transfer>.measureSpan
        var received: [ObjectIdentifier: Int] = [:]
        held.measure(target: origin.target, now: start) { received[ObjectIdentifier($0)] ?? 0 }
        received[ObjectIdentifier(faster)] = 90_000 * 2
        received[ObjectIdentifier(slower)] = 60_000 * 2
        received[ObjectIdentifier(stalled)] = 80_000 * 2
        held.measure(target: origin.target, now: start + span) { received[ObjectIdentifier($0)] ?? 0 }
        #expect(held.entries[origin.target]?.first?.reading == .rate(90_000))
        let counts = [origin: 1, busy: 2]
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: start + span) { counts[$0] ?? 0 } === stalled)
        held.resumed(stalled, target: origin.target)
        #expect(held.toCut(target: origin.target, waiting: 1, free: 0, now: start + span) { counts[$0] ?? 0 } === slower)
    }

    /// However often requests wait, an origin's transfers are measured at most once per
    /// interval: a wait does not cost a system call per paused transfer each time.
    @Test func anOriginIsMeasuredAtMostOncePerInterval() {
        var held = HeldTransfers<Transfer>()
        held.paused(Transfer(), share: origin, now: 0)
        var reads = 0
        func read(_: Transfer) -> Int? {
            reads += 1
            return 0
        }
        let interval = HeldTransfers<Transfer>.measureInterval
        for step in 0..<10 { held.measure(target: origin.target, now: limit + UInt64(step) * interval / 4, delivered: read) }
        #expect(reads == 3, "at 0, 1 and 2 intervals")
        held.measure(target: origin.target + 1, now: limit, delivered: read)
        #expect(reads == 3, "no transfer paused for another origin")
    }
}

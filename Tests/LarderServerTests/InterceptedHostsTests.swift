import Testing

@testable import LarderServer

/// The per-host failure counts behind `/stats` and `GET /tls`, the counts per `tls.intercept`
/// entry behind the metrics, and what of it reaches the splice table, over an explicit clock.
@Suite struct InterceptedHostsTests {
    let second: UInt64 = 1_000_000_000

    /// Records a failed handshake of `client` with `host` (matched by `rule`) at `now`.
    @discardableResult
    private func fail(
        _ hosts: InterceptedHosts, client: String = "127.0.0.2", host: String, rule: String = "*.test", refusal: Bool,
        now: UInt64
    ) -> Bool {
        hosts.record(
            client: client, host: host, rule: rule, failure: refusal ? "rejected: unknown ca" : "failed: not TLS", isRefusal: refusal,
            threshold: 1, spliceFor: 3600 * second, now: now)
    }

    @Test func failuresThatAreNoRefusalsAreCountedButSpliceNoOne() {
        let hosts = InterceptedHosts()
        for index in 0..<10 {
            let started = fail(hosts, host: "a.test", refusal: false, now: UInt64(index) * second)
            #expect(!started)
        }
        let admitted = hosts.admits(client: "127.0.0.2", host: "a.test", now: 10 * second)
        #expect(admitted, "junk, timeouts and closes before the certificate never count towards a splice")
        let failing = hosts.failing(10, now: 10 * second)
        #expect(failing.count == 1 && failing.first?.failures.count == 10 && failing.first?.failures.refusals == 0)
        #expect(failing.first?.splicedClients == 0)
        #expect(hosts.countsByRule() == ["*.test": .init(failures: 10, refusals: 0)])

        let started = fail(hosts, host: "a.test", refusal: true, now: 11 * second)
        #expect(started, "a refusal does, with a threshold of 1")
        #expect(hosts.countsByRule() == ["*.test": .init(failures: 11, refusals: 1)])
        #expect(hosts.failing(10, now: 12 * second).first?.splicedClients == 1)
    }

    /// The per-host table is bounded (a client may CONNECT to any number of names under a
    /// wildcard entry); the host whose last failure is oldest makes room. It holds counts only:
    /// pushing a host out of it ends no splice, and the per-entry counts keep every failure.
    @Test func theFailingHostsTableDropsTheOldestLastFailureAndNoSplice() {
        let hosts = InterceptedHosts(capacity: 2)
        fail(hosts, client: "127.0.0.4", host: "spliced.test", refusal: true, now: 0)
        fail(hosts, host: "b.test", refusal: false, now: 1)
        fail(hosts, host: "spliced.test", refusal: false, now: 2)
        fail(hosts, host: "c.test", refusal: false, now: 3)
        let kept = Set(hosts.failing(10, now: 4).map(\.host))
        #expect(kept == ["spliced.test", "c.test"], "b.test's last failure was the oldest")
        for index in 0..<100 { fail(hosts, host: "x\(index).test", refusal: false, now: UInt64(10 + index)) }
        #expect(hosts.failing(10, now: 200).count == 2)
        let stillSpliced = !hosts.admits(client: "127.0.0.4", host: "spliced.test", now: 200)
        #expect(stillSpliced, "the splice outlived its host's failure counts")
        #expect(hosts.countsByRule()["*.test"]?.failures == 104)
    }
}

import LarderHTTP
import LarderIO
import LarderUpstream
import Testing

@testable import LarderServer

/// The destination guard: the one caller of the destination policy, by the target as written
/// and by the resolved address, with its verdicts kept per policy generation.
@Suite(.timeLimit(.minutes(1))) struct DestinationGuardTests {
    static let identity = "larder-1234abcd"
    static let remoteClient = DestinationPolicyTests.address("198.51.100.20:50000")
    static let localClient = DestinationPolicyTests.address("127.0.0.1:50000")

    struct Case: CustomTestStringConvertible, Sendable {
        let host: String
        let port: Int
        let via: String?
        let client: SocketAddress
        let expected: DestinationGuard.Verdict
        var testDescription: String { "\(host):\(port) via \(via ?? "-") from \(client)" }
    }

    static let cases: [Case] = [
        .init(host: "example.com", port: 80, via: nil, client: remoteClient, expected: .allowed),
        .init(host: "example.com", port: 80, via: "1.1 other-proxy", client: remoteClient, expected: .allowed),
        .init(host: "example.com", port: 80, via: "1.1 \(identity)", client: remoteClient, expected: .loop),
        .init(host: "example.com", port: 80, via: "1.0 a, 1.1 \(identity) (Larder)", client: remoteClient, expected: .loop),
        .init(host: "127.0.0.1", port: 3129, via: nil, client: localClient, expected: .refused(.ownListener(.admin))),
        .init(host: "2130706433", port: 3128, via: nil, client: localClient, expected: .refused(.ownListener(.proxy))),
        .init(host: "0", port: 80, via: nil, client: localClient, expected: .refused(.unspecified)),
        // The policy's refusal is answered before the loop is looked for.
        .init(host: "0", port: 80, via: "1.1 \(identity)", client: localClient, expected: .refused(.unspecified)),
        .init(host: "127.0.0.1", port: 8080, via: nil, client: localClient, expected: .allowed),
        .init(host: "127.0.0.1", port: 8080, via: nil, client: remoteClient, expected: .refused(.local)),
        .init(host: "blocked.example", port: 443, via: nil, client: remoteClient, expected: .refused(.denied(rule: "blocked.example"))),
        // A name is left to the connect-time check.
        .init(host: "localhost", port: 3129, via: nil, client: remoteClient, expected: .allowed),
    ]

    @Test(arguments: cases)
    func theTargetAsWrittenGetsItsVerdict(_ test: Case) {
        var guardian = DestinationGuard()
        let headers = HTTPHeaders(test.via.map { [("Via", $0)] } ?? [])
        let verdict = guardian.check(
            host: test.host, port: test.port, headers: headers, identity: Self.identity, client: test.client, generation: 1,
            policy: { DestinationPolicyTests.policy(deny: ["blocked.example"]) })
        #expect(verdict == test.expected)
    }

    @Test func theVerdictIsKeptForTheSameTargetUnderTheSameGeneration() {
        var guardian = DestinationGuard()
        var built = 0
        let open = { () -> DestinationPolicy in
            built += 1
            return DestinationPolicyTests.policy()
        }
        let denying = { () -> DestinationPolicy in
            built += 1
            return DestinationPolicyTests.policy(deny: ["example.com"])
        }
        func check(_ host: String, generation: Int, _ policy: () -> DestinationPolicy, via: String? = nil) -> DestinationGuard.Verdict {
            let headers = HTTPHeaders(via.map { [("Via", $0)] } ?? [])
            return guardian.check(
                host: host, port: 80, headers: headers, identity: Self.identity, client: Self.remoteClient, generation: generation,
                policy: policy)
        }
        #expect(check("example.com", generation: 1, open) == .allowed)
        #expect(check("example.com", generation: 1, denying) == .allowed, "kept: the policy is not asked")
        #expect(built == 1)
        // The loop is looked for on every request, kept verdict or not.
        #expect(check("example.com", generation: 1, denying, via: "1.1 \(Self.identity)") == .loop)
        #expect(check("example.com", generation: 2, denying) == .refused(.denied(rule: "example.com")), "a new generation asks again")
        #expect(check("other.example", generation: 2, open) == .allowed, "another host asks again")
        #expect(built == 3)
    }

    @Test func aTunnelDialsOnlyTheAddressesThePolicyAllows() {
        var guardian = DestinationGuard()
        let policy = DestinationPolicyTests.policy(listen: ["0.0.0.0:3128"], deny: ["10.0.0.0/8"])
        let addresses = ["10.1.1.1:443", "198.51.100.7:443", "127.0.0.1:3128", "[2001:db8::7]:443"].map(DestinationPolicyTests.address)
        let some = guardian.dialable(addresses, host: "mixed.example", client: Self.remoteClient, generation: 1, policy: policy)
        #expect(some.allowed == [addresses[1], addresses[3]])
        #expect(some.refusal == nil)
        let none = guardian.dialable(
            [addresses[0], addresses[2]], host: "mixed.example", client: Self.remoteClient, generation: 1, policy: policy)
        #expect(none.allowed.isEmpty)
        #expect(none.refusal == .denied(rule: "10.0.0.0/8"), "the first refusal is the one answered")
        let empty = guardian.dialable([], host: "mixed.example", client: Self.remoteClient, generation: 1, policy: policy)
        #expect(empty.allowed.isEmpty && empty.refusal == nil)
    }

    @Test func aFillChecksEachAddressAsATunnelDoes() {
        var guardian = DestinationGuard()
        let policy = DestinationPolicyTests.policy(deny: ["*.internal"])
        let remote = guardian.connectCheck(host: "db.internal", client: Self.remoteClient, generation: 1, policy: policy)
        let denied = DestinationPolicy.Refusal.denied(rule: "*.internal").description
        #expect(remote.refusal(for: DestinationPolicyTests.address("198.51.100.7:80")) == denied)
        let check = guardian.connectCheck(host: "example.com", client: Self.localClient, generation: 2, policy: policy)
        #expect(check.refusal(for: DestinationPolicyTests.address("198.51.100.7:80")) == nil)
        #expect(check.refusal(for: DestinationPolicyTests.address("127.0.0.1:8080")) == nil, "a local client may reach a local origin")
        #expect(
            check.refusal(for: DestinationPolicyTests.address("127.0.0.1:3129"))
                == DestinationPolicy.Refusal.ownListener(.admin).description)
        let fromAfar = guardian.connectCheck(host: "example.com", client: Self.remoteClient, generation: 3, policy: policy)
        #expect(fromAfar.refusal(for: DestinationPolicyTests.address("127.0.0.1:8080")) == DestinationPolicy.Refusal.local.description)
    }
}

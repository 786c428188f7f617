import LarderConfig
import LarderIO
import Testing

@testable import LarderServer

/// The destination policy as a pure value: listeners, host addresses and configuration in, a
/// verdict per address out (docs/SECURITY.md, "Destinations").
@Suite(.timeLimit(.minutes(1))) struct DestinationPolicyTests {
    static func address(_ text: String) -> SocketAddress { SocketAddress(parsing: text)! }

    static func policy(
        listen: [String] = ["127.0.0.1:3128"], admin: String? = "127.0.0.1:3129", host: [String] = ["192.0.2.10"],
        allowLocal: Bool? = nil, deny: [String] = [], allow: [String] = []
    ) -> DestinationPolicy {
        var config = ProxyConfig()
        config.allowLocalDestinations = allowLocal
        config.denyDestinations = deny.map { HostRule(parsing: $0)! }
        config.allowDestinations = allow.map { HostRule(parsing: $0)! }
        var own = ProcessState.OwnAddresses()
        own.proxy = listen.map(address)
        own.admin = admin.map(address)
        return DestinationPolicy(config: config, own: own, hostAddresses: host.map { address($0 + ":0") })
    }

    @Test(arguments: ["127.0.0.1:3129", "[::ffff:127.0.0.1]:3129", "0.0.0.0:3129", "[::]:3129"])
    func theAdminListenerIsRefusedWhateverTheSpelling(_ target: String) {
        let verdict = Self.policy().refusal(host: "x", address: Self.address(target), clientIsLocal: true)
        #expect(verdict == .ownListener(.admin) || verdict == .unspecified, "\(target): \(String(describing: verdict))")
    }

    @Test func aListenerOnEveryAddressIsReachedThroughAnyLocalAddress() {
        let policy = Self.policy(listen: ["0.0.0.0:3128"])
        for target in ["127.0.0.5:3128", "192.0.2.10:3128", "[::1]:3128"] {
            #expect(policy.refusal(host: "x", address: Self.address(target), clientIsLocal: true) == .ownListener(.proxy), "\(target)")
        }
        // Another port on a local address is a local destination, not a listener.
        #expect(policy.refusal(host: "x", address: Self.address("127.0.0.1:8080"), clientIsLocal: true) == .local)
    }

    @Test func localDestinationsNeedALocalClientAndTheSetting() {
        let loopbackOnly = Self.policy()
        let origin = Self.address("127.0.0.1:8080")
        #expect(loopbackOnly.refusal(host: "x", address: origin, clientIsLocal: true) == nil, "auto: true on loopback listeners")
        #expect(loopbackOnly.refusal(host: "x", address: origin, clientIsLocal: false) == .local)
        let widened = Self.policy(listen: ["0.0.0.0:3128"])
        #expect(widened.refusal(host: "x", address: origin, clientIsLocal: true) == .local, "auto: false once widened")
        let opened = Self.policy(listen: ["0.0.0.0:3128"], allowLocal: true)
        #expect(opened.refusal(host: "x", address: origin, clientIsLocal: true) == nil)
        for local in ["169.254.169.254:80", "[fe80::1]:80", "192.0.2.10:80", "[::ffff:169.254.169.254]:80"] {
            #expect(widened.refusal(host: "x", address: Self.address(local), clientIsLocal: true) == .local, "\(local)")
        }
        #expect(widened.refusal(host: "x", address: Self.address("198.51.100.7:80"), clientIsLocal: false) == nil)
    }

    @Test func allowWinsOverDenyButNeverOverTheListeners() {
        let policy = Self.policy(deny: ["10.0.0.0/8", "*.internal"], allow: ["10.1.2.3", "mirror.internal", "127.0.0.1/32"])
        #expect(policy.refusal(host: "x", address: Self.address("10.9.9.9:80"), clientIsLocal: true) == .denied(rule: "10.0.0.0/8"))
        #expect(policy.refusal(host: "x", address: Self.address("10.1.2.3:80"), clientIsLocal: true) == nil)
        #expect(
            policy.refusal(host: "db.internal", address: Self.address("198.51.100.7:80"), clientIsLocal: true)
                == .denied(rule: "*.internal"))
        #expect(policy.refusal(host: "mirror.internal", address: Self.address("10.9.9.9:80"), clientIsLocal: true) == nil)
        #expect(policy.refusal(host: "x", address: Self.address("127.0.0.1:3129"), clientIsLocal: true) == .ownListener(.admin))
    }

    @Test(arguments: ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.000.000.001", "0", "::ffff:127.0.0.1"])
    func spellingsOfAnAddressGetItsVerdictBeforeAnyLookup(_ host: String) {
        let verdict = Self.policy().refusal(host: host, port: 3129, clientIsLocal: true)
        #expect(verdict == .ownListener(.admin) || verdict == .unspecified, "\(host): \(String(describing: verdict))")
    }

    @Test func namesAreLeftToTheConnectTimeCheckUnlessARuleNamesThem() {
        let policy = Self.policy(deny: ["blocked.example"])
        #expect(policy.refusal(host: "localhost", port: 3129, clientIsLocal: true) == nil)
        #expect(policy.refusal(host: "blocked.example", port: 80, clientIsLocal: true) == .denied(rule: "blocked.example"))
    }
}

import LarderHTTP
import LarderIO
import Testing

@testable import LarderServer

/// What the admin listener refuses from a web page: another name in `Host` (DNS rebinding) and
/// a changing call from another site.
@Suite struct AdminRequestGuardTests {
    let loopback = AdminRequestGuard(local: SocketAddress(parsing: "127.0.0.1:3129"), allowHosts: [])
    let lan = AdminRequestGuard(local: SocketAddress(parsing: "10.1.2.3:3129"), allowHosts: ["larder.internal", "gw:8080"])

    @Test func hostMustNameTheListenerOrLocalhostWithItsPort() {
        // Loopback names, whatever the port: no DNS answer stands for them (ssh -L, port maps).
        for host in [
            "127.0.0.1:3129", "localhost:3129", "LOCALHOST:3129", "[::1]:3129", "127.0.0.2:3129", "0.0.0.0:3129", "localhost:9000",
            "127.0.0.1", nil,
        ] {
            #expect(loopback.refusal(method: .get, host: host, origin: nil, fetchSite: nil) == nil, "\(host ?? "none")")
        }
        for host in ["", "evil.example:3129", "evil.example", "localhost.evil.example:3129", "10.1.2.3:3129", "[::1]:x", "[::1]:0"] {
            #expect(loopback.refusal(method: .get, host: host, origin: nil, fetchSite: nil)?.status == 421, "\(host)")
        }
        // The answer and the log line quote a client's value, bounded.
        let long = loopback.refusal(method: .get, host: String(repeating: "a", count: 10_000) + ":3129", origin: nil, fetchSite: nil)
        #expect(long?.status == 421 && (long?.message.count ?? .max) < 400)
        // A wildcard listener: the address the connection reached is its name; so are allow_hosts.
        for host in ["10.1.2.3:3129", "larder.internal", "Larder.Internal:9999", "gw:8080"] {
            #expect(lan.refusal(method: .get, host: host, origin: nil, fetchSite: nil) == nil, "\(host)")
        }
        for host in ["10.1.2.4:3129", "10.1.2.3:3130", "gw:8081", "evil.larder.internal:3129"] {
            #expect(lan.refusal(method: .get, host: host, origin: nil, fetchSite: nil)?.status == 421, "\(host)")
        }
    }

    @Test func changingCallsRefuseOtherSitesAndReadsDoNot() {
        let host = "127.0.0.1:3129"
        #expect(loopback.refusal(method: .post, host: host, origin: "http://evil.example", fetchSite: nil)?.status == 403)
        #expect(loopback.refusal(method: .delete, host: host, origin: "null", fetchSite: nil)?.status == 403)
        #expect(loopback.refusal(method: .post, host: host, origin: "http://127.0.0.1:3130", fetchSite: nil)?.status == 403)
        #expect(loopback.refusal(method: .post, host: host, origin: "https://127.0.0.1:3129", fetchSite: nil)?.status == 403)
        #expect(loopback.refusal(method: .post, host: host, origin: nil, fetchSite: "cross-site")?.status == 403)
        #expect(loopback.refusal(method: .post, host: host, origin: nil, fetchSite: "same-site")?.status == 403)
        #expect(loopback.refusal(method: HTTPMethod("PURGE"), host: host, origin: "http://evil.example", fetchSite: nil)?.status == 403)
        // The dashboard's own calls, a command-line client, and reads from anywhere.
        #expect(loopback.refusal(method: .post, host: host, origin: "http://127.0.0.1:3129", fetchSite: "same-origin") == nil)
        #expect(loopback.refusal(method: .post, host: "localhost:3129", origin: "http://LOCALHOST:3129", fetchSite: nil) == nil)
        #expect(loopback.refusal(method: .delete, host: host, origin: nil, fetchSite: "none") == nil)
        #expect(loopback.refusal(method: .post, host: host, origin: nil, fetchSite: nil) == nil)
        #expect(loopback.refusal(method: .post, host: nil, origin: "http://127.0.0.1:3129", fetchSite: nil)?.status == 403)
        #expect(loopback.refusal(method: .get, host: host, origin: "http://evil.example", fetchSite: "cross-site") == nil)
    }
}

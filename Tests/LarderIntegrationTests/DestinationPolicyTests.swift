import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// The destination policy acts on the address really connected to: every spelling of the
    /// admin listener, local destinations behind a widened listener, deny/allow lists, tunnels,
    /// and a pooled upstream connection that a reload made forbidden.
    @Suite(.timeLimit(.minutes(3))) struct DestinationPolicy {
        /// Spellings of 127.0.0.1 (and of "this host") that the C resolver accepts.
        static let loopbackSpellings = [
            "127.0.0.1", "127.1", "0.0.0.0", "0", "2130706433", "0x7f000001", "0177.0.0.1", "127.000.000.001",
            "localhost", "[::]", "[::ffff:127.0.0.1]",
        ]

        @Test func everySpellingOfTheAdminListenerIsRefused() throws {
            let origin = try Origin()
            let larder = try Larder()
            let stored = origin.url("/kept?cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [stored]).status == 200)
            for host in Self.loopbackSpellings {
                let stats = try Curl.viaProxy(larder.proxy, ["http://\(host):\(larder.adminPort)/stats"])
                #expect(stats.status == 403, "GET /stats via \(host)")
                #expect(!stats.text.contains("\"requests\""), "no stats leak via \(host)")
                let clear = try Curl.viaProxy(larder.proxy, ["-X", "DELETE", "http://\(host):\(larder.adminPort)/cache"])
                #expect(clear.status == 403, "DELETE /cache via \(host)")
            }
            // The cache was never cleared through the proxy port.
            #expect(try Curl.viaProxy(larder.proxy, [stored]).cacheStatus?.hit == true)
            #expect(try origin.count("/kept?cc=max-age=600") == 1)
            #expect(larder.child.stderr.contains("refused a destination"))
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metricValue(metrics, "larder_destinations_refused_total") == Double(2 * Self.loopbackSpellings.count))
        }

        @Test func tunnelsToTheAdminListenerAreRefusedWhateverTheSpelling() throws {
            let larder = try Larder()
            // The admin port is known once it is bound: allow CONNECT to it by a reload.
            try larder.reload(Tunnels.config(ports: [larder.adminPort, larder.proxyPort]))
            for port in [larder.adminPort, larder.proxyPort] {
                for host in ["0.0.0.0", "0", "127.1", "localhost", "[::]", "[::ffff:127.0.0.1]", "2130706433"] {
                    let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
                    connection.send("CONNECT \(host):\(port) HTTP/1.1\r\nHost: \(host):\(port)\r\n\r\n")
                    let response = try connection.readResponse(headRequest: true)
                    #expect(response.status == 403, "CONNECT \(host):\(port)")
                }
            }
            #expect(try larder.activeConnections() <= 1, "no tunnel was opened")
        }

        @Test func aWidenedListenerKeepsLocalDestinationsClosed() throws {
            let origin = try Origin()
            let larder = try Larder(listen: ["0.0.0.0:0"])
            for host in ["127.0.0.1", "127.1", "localhost", "[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]", "0x7f000001"] {
                let refused = try Curl.viaProxy(larder.proxy, ["http://\(host):\(origin.port)/inner"])
                #expect(refused.status == 403, "\(host)")
                #expect(refused.text.contains("local address") || refused.text.contains("unspecified"), "\(host): \(refused.text)")
            }
            let tunnel = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
            tunnel.send("CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\n\r\n")
            #expect(try tunnel.readResponse(headRequest: true).status == 403)
            #expect(try origin.total() == 0, "nothing reached the local origin")

            let opened = try Larder(config: "[proxy]\nallow_local_destinations = true\n", listen: ["0.0.0.0:0"])
            #expect(try Curl.viaProxy(opened.proxy, [origin.url("/inner")]).status == 200)
            #expect(try origin.count("/inner") == 1)
        }

        @Test func denyAndAllowListsMatchNamesAndResolvedAddresses() throws {
            let origin = try Origin()
            let larder = try Larder(
                config: "[proxy]\ndeny_destinations = [\"127.0.0.0/8\", \"::1/128\", \"blocked.localhost\"]\n"
                    + "allow_destinations = [\"127.0.0.1/32\"]\n")
            // The exception wins over the deny list for exactly its address.
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/allowed")]).status == 200)
            let denied = try Curl.viaProxy(larder.proxy, ["http://127.0.0.2:\(origin.port)/denied"])
            #expect(denied.status == 403)
            #expect(denied.text.contains("127.0.0.0/8"))
            let byName = try Curl.viaProxy(larder.proxy, ["http://blocked.localhost:\(origin.port)/by-name"])
            #expect(byName.status == 403)
            #expect(byName.text.contains("blocked.localhost"))
            #expect(try origin.total() == 1)
        }

        @Test func aPooledConnectionIsCheckedAgainForEachRequest() throws {
            let origin = try Origin()
            let larder = try Larder()
            // localhost resolves to 127.0.0.1 (the origin listens there); curl keeps the
            // connection in its pool.
            #expect(try Curl.viaProxy(larder.proxy, ["http://localhost:\(origin.port)/first?idle=30"]).status == 200)
            try larder.reload("[proxy]\ndeny_destinations = [\"127.0.0.0/8\", \"::1/128\"]\n")
            // The name matches no rule; only the address of the reused connection can refuse it.
            let second = try Curl.viaProxy(larder.proxy, ["http://localhost:\(origin.port)/second?idle=30"])
            #expect(second.status == 403, "\(second.text)")
            #expect(try origin.count("/second?idle=30") == 0)
        }
    }
}

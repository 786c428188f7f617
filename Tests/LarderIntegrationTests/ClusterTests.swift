import Foundation
import Glibc
import LarderServer
import Testing

extension IntegrationTests {
    /// Several real Larder processes on loopback: parent proxies (a cache hierarchy) and a
    /// consistent-hash cluster behind the real HAProxy, with the shipped haproxy.cfg.
    @Suite(.timeLimit(.minutes(3))) struct Cluster {
        // MARK: Parents

        @Test func childServesItsMissFromTheParentsCacheWithCredentials() throws {
            let origin = try Origin()
            let secret = try hashPassword(user: "child", password: "tier two")
            let parent = try Larder(config: "[proxy]\nauth_users = [\"\(secret)\"]\n")
            let child = try Larder(config: "[upstream]\nparent = \"http://child:tier%20two@127.0.0.1:\(parent.proxyPort)\"\n")
            let url = origin.url("/tiered?cc=max-age=300&size=5000")

            let warm = try Curl.viaProxy(parent.proxy, ["--proxy-user", "child:tier two", url])
            #expect(warm.status == 200)
            #expect(try origin.count("/tiered?cc=max-age=300&size=5000") == 1)

            let first = try Curl.viaProxy(child.proxy, [url])
            #expect(first.status == 200)
            #expect(bodyMismatch(first.body, warm.body) == nil)
            // RFC 9211 §2: the parent's member first (a hit there), then the child's (a miss).
            let members = first.combined("cache-status") ?? ""
            #expect(members.hasPrefix("larder; hit"), "\(members)")
            #expect(first.cacheStatus?.fwd == "uri-miss")
            #expect(first.cacheStatus?.stored == true)
            #expect(try origin.count("/tiered?cc=max-age=300&size=5000") == 1, "the child's miss never reached the origin")

            let second = try Curl.viaProxy(child.proxy, [url])
            #expect(second.cacheStatus?.isMemoryHit == true)
            let parentStats = try parent.stats()
            let parents = try child.stats().parents
            #expect(parents.count == 1)
            #expect(parents.first?.parent == "http://127.0.0.1:\(parent.proxyPort)", "credentials never shown")
            #expect(parents.first?.requests == 1)
            #expect((parentStats.requests["hit"] ?? 0) >= 1)

            // Wrong credentials in the parent URL: the parent's 407 reaches the client.
            let wrong = try Larder(config: "[upstream]\nparent = \"http://child:nope@127.0.0.1:\(parent.proxyPort)\"\n")
            #expect(try Curl.viaProxy(wrong.proxy, [origin.url("/other")]).status == 407)
            #expect(try origin.count("/other") == 0)
        }

        @Test func failsOverFromADeadParentAndSkipsItWhileItBacksOff() throws {
            let origin = try Origin()
            let live = try Larder()
            let dead = try freePort()
            let child = try Larder(
                config: """
                    [upstream]
                    parents = ["http://127.0.0.1:\(dead)", "http://127.0.0.1:\(live.proxyPort)"]
                    parent_selection = "failover"
                    parent_backoff = "1h"
                    [retry]
                    strategy = "none"
                    """)
            for index in 0..<3 {
                let response = try Curl.viaProxy(child.proxy, [origin.url("/f\(index)?cc=max-age=60")])
                #expect(response.status == 200, "request \(index)")
            }
            #expect(try origin.total() == 3)
            let metrics = try Curl.run(["http://127.0.0.1:\(child.adminPort)/metrics"]).text
            let deadLabel = "parent=\"http://127.0.0.1:\(dead)\""
            let liveLabel = "parent=\"http://127.0.0.1:\(live.proxyPort)\""
            // One failure, then the dead parent is passed over for the back-off period.
            #expect(metricValue(metrics, "larder_parent_failures_total{\(deadLabel)}") == 1)
            #expect(metricValue(metrics, "larder_parent_skips_total{\(deadLabel)}") == 2)
            #expect(metricValue(metrics, "larder_parent_down{\(deadLabel)}") == 1)
            #expect(metricValue(metrics, "larder_parent_requests_total{\(liveLabel)}") == 3)
            #expect(metricValue(metrics, "larder_parent_failovers_total") == 1)
            _ = try child.child.waitForOutput { $0.contains("parent proxy unreachable") && $0.contains("\(dead)") }
            // The access log names the failover like a retry, with no delay.
            _ = try child.child.waitForOutput(stream: \.stdout) { $0.contains("retries=parent:0ms") }
        }

        @Test func hashSelectionGivesEveryURLOneHomeParent() throws {
            let origin = try Origin()
            let parents = [try Larder(), try Larder()]
            let list = parents.map { "\"http://127.0.0.1:\($0.proxyPort)\"" }.joined(separator: ", ")
            let config = "[upstream]\nparents = [\(list)]\nparent_selection = \"hash\"\n"
            let children = [try Larder(config: config), try Larder(config: config)]
            let paths = (0..<24).map { "/h\($0)?cc=max-age=300" }
            for path in paths { #expect(try Curl.viaProxy(children[0].proxy, [origin.url(path)]).status == 200) }
            // A second child with the same parents picks the same home for every URL: the
            // parent tier holds each object once, and the origin sees each URL once.
            for path in paths {
                let response = try Curl.viaProxy(children[1].proxy, [origin.url(path)])
                #expect(response.combined("cache-status")?.hasPrefix("larder; hit") == true, "\(path)")
            }
            #expect(try origin.total() == paths.count)
            var homes = [0, 0]
            for path in paths {
                let holders = try parents.indices.filter { try Self.holds(parents[$0], origin.url(path)) }
                #expect(holders.count == 1, "\(path) is cached on exactly one parent: \(holders)")
                if let home = holders.first { homes[home] += 1 }
            }
            #expect(homes.allSatisfy { $0 > 0 }, "both parents are home to some URLs: \(homes)")
        }

        @Test func directExceptionsAndRoutesBypassTheParent() throws {
            let origin = try Origin()
            let dead = try freePort()
            let child = try Larder(
                config: """
                    [upstream]
                    parent = "http://127.0.0.1:\(dead)"
                    direct = ["localhost", "*.internal", "127.0.0.0/8"]
                    [retry]
                    strategy = "none"
                    [[route]]
                    match = "http://localhost:*/routed/*"
                    parent = "direct"
                    """)
            let direct = try Curl.viaProxy(child.proxy, [origin.url("/d?cc=max-age=60")])
            #expect(direct.status == 200)
            let routed = try Curl.viaProxy(child.proxy, ["http://localhost:\(origin.port)/routed/x"])
            #expect(routed.status == 200)
            #expect(try origin.total() == 2)

            let strict = try Larder(config: "[upstream]\nparent = \"http://127.0.0.1:\(dead)\"\n[retry]\nstrategy = \"none\"\n")
            let failed = try Curl.viaProxy(strict.proxy, [origin.url("/d2")])
            #expect(failed.status == 502)
            #expect(failed.cacheStatus?.detail?.hasPrefix("connect") == true, "\(failed.combined("cache-status") ?? "")")
            #expect(try origin.total() == 2, "without an exception nothing goes around the dead parent")
        }

        @Test func theParentsAddressIsTheOperatorsChoiceNotCheckedAsADestination() throws {
            let origin = try Origin()
            let parent = try Larder()
            let deny = "[proxy]\ndeny_destinations = [\"127.0.0.0/8\", \"::1/128\"]\n"
            let child = try Larder(config: deny + "[upstream]\nparent = \"http://127.0.0.1:\(parent.proxyPort)\"\n")
            // A name no rule matches: only an address connected to can be refused. The child
            // connects to its parent's loopback address; the origin's is the parent's to check.
            let url = "http://localhost:\(origin.port)/via-parent"
            let viaParent = try Curl.viaProxy(child.proxy, [url])
            #expect(viaParent.status == 200, "\(viaParent.text)")
            #expect(try origin.count("/via-parent") == 1)
            // Without the parent the same destination is refused where it is connected to.
            let direct = try Larder(config: deny)
            let refused = try Curl.viaProxy(direct.proxy, ["http://localhost:\(origin.port)/direct"])
            #expect(refused.status == 403, "\(refused.text)")
            #expect(try origin.count("/direct") == 0)
        }

        @Test func theDaemonsNoProxyEnvironmentDoesNotRouteAroundTheParent() throws {
            let origin = try Origin()
            let parent = try Larder()
            // curl reads no_proxy/NO_PROXY for every transfer unless told otherwise; exceptions
            // to the parent are `upstream.direct`'s, not the service environment's.
            let child = try Larder(
                config: "[upstream]\nparent = \"http://127.0.0.1:\(parent.proxyPort)\"\n",
                environment: ["no_proxy": "*", "NO_PROXY": "*"])
            let response = try Curl.viaProxy(child.proxy, [origin.url("/through-parent")])
            #expect(response.status == 200)
            let parents = try child.stats().parents
            #expect(parents.first?.requests == 1, "\(parents)")
            let parentRequests = try parent.stats().requests
            #expect(parentRequests["miss"] == 1, "the parent fetched it: \(parentRequests)")
            #expect(try origin.count("/through-parent") == 1)
        }

        @Test func proxiesNamingEachOtherAsParentsStopTheLoopWith508() throws {
            let origin = try Origin()
            let portA = try freePort()
            let portB = try freePort()
            let a = try Larder(config: "[upstream]\nparent = \"http://127.0.0.1:\(portB)\"\n", listen: ["127.0.0.1:\(portA)"])
            let b = try Larder(config: "[upstream]\nparent = \"http://127.0.0.1:\(portA)\"\n", listen: ["127.0.0.1:\(portB)"])
            let response = try Curl.viaProxy(a.proxy, [origin.url("/loop")])
            #expect(response.status == 508)
            #expect(try origin.total() == 0)
            _ = try a.child.waitForOutput { $0.contains("forwarding loop detected") }
            _ = b
        }

        // MARK: CONNECT through parents

        /// `curl --proxytunnel` through `proxy` to the TLS target; the body and its digest header.
        static func tunnelDownload(_ proxy: String, _ target: TunnelTarget, size: Int) throws -> (status: Int32, ok: Bool, stderr: String) {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let download = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-sS", "--max-time", "60", "--proxytunnel", "--proxy", proxy, "--cacert", target.certificate,
                    "-D", directory + "/headers", "-o", directory + "/body", "https://127.0.0.1:\(target.port)/bytes?size=\(size)",
                ])
            download.waitUntilExit()
            let headers = (try? String(contentsOfFile: directory + "/headers", encoding: .utf8)) ?? ""
            let expected = headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-content-sha256:") }
                .map { $0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces) }
            let ok = (try? sha256(of: directory + "/body")) == expected && expected != nil
            return (download.terminationStatus, ok, download.stderr)
        }

        @Test func connectTunnelsChainThroughTheParentWithItsCredentials() throws {
            let target = try TunnelTarget(.tls)
            let secret = try hashPassword(user: "child", password: "s3cret")
            let parent = try Larder(config: "[proxy]\nconnect_ports = [\(target.port)]\nauth_users = [\"\(secret)\"]\n")
            let child = try Larder(
                config: """
                    [proxy]
                    connect_ports = [\(target.port)]
                    [upstream]
                    parent = "http://child:s3cret@127.0.0.1:\(parent.proxyPort)"
                    """)
            let result = try Self.tunnelDownload(child.proxy, target, size: 3 * 1024 * 1024)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.ok, "3 MiB arrived intact through child and parent")
            // Both proxies opened a tunnel: the child's went to the parent, not to the target.
            let parentTunnels = try parent.stats().tunnels.opened
            #expect(parentTunnels == 1)
            let parents = try child.stats().parents
            #expect(parents.first?.requests == 1)

            // Without the right credentials the parent says 407; the client cannot fix that, so
            // it hears 502 with the parent's answer named.
            let wrong = try Larder(
                config: """
                    [proxy]
                    connect_ports = [\(target.port)]
                    [upstream]
                    parent = "http://child:nope@127.0.0.1:\(parent.proxyPort)"
                    """)
            let (connection, response) = try Tunnels.connect(wrong, to: target.port)
            #expect(response.status == 502)
            _ = try wrong.child.waitForOutput { $0.contains("parent proxy refused a CONNECT") && $0.contains("407") }
            _ = connection
        }

        @Test func connectFailsOverToTheNextParentAndStopsLoops() throws {
            let target = try TunnelTarget(.tls)
            let live = try Larder(config: "[proxy]\nconnect_ports = [\(target.port)]\n")
            let dead = try freePort()
            let child = try Larder(
                config: """
                    [proxy]
                    connect_ports = [\(target.port)]
                    [upstream]
                    parents = ["http://127.0.0.1:\(dead)", "http://127.0.0.1:\(live.proxyPort)"]
                    parent_selection = "failover"
                    """)
            let result = try Self.tunnelDownload(child.proxy, target, size: 64 * 1024)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.ok)
            let metrics = try Curl.run(["http://127.0.0.1:\(child.adminPort)/metrics"]).text
            #expect(metricValue(metrics, "larder_parent_failures_total{parent=\"http://127.0.0.1:\(dead)\"}") == 1)
            #expect(metricValue(metrics, "larder_parent_failovers_total") == 1)

            // Two proxies that name each other: the CONNECT comes back with our Via and stops.
            let portA = try freePort()
            let portB = try freePort()
            let a = try Larder(
                config: "[proxy]\nconnect_ports = [\(target.port)]\n[upstream]\nparent = \"http://127.0.0.1:\(portB)\"\n",
                listen: ["127.0.0.1:\(portA)"])
            let b = try Larder(
                config: "[proxy]\nconnect_ports = [\(target.port)]\n[upstream]\nparent = \"http://127.0.0.1:\(portA)\"\n",
                listen: ["127.0.0.1:\(portB)"])
            let (connection, response) = try Tunnels.connect(a, to: target.port)
            #expect(response.status == 508)
            _ = (connection, b)
        }

        /// A tunnel fails over where a miss does (AttemptPlanner decides both): a parent that was
        /// reached but does not answer CONNECT in time (it is still reaching the target), or
        /// answers with something that is not HTTP, ends the tunnel there; the next parent is
        /// not tried and the parent is not marked down.
        @Test func connectFailsOverOnlyWhereAMissWould() throws {
            let target = try TunnelTarget(.tls)
            let live = try Larder(config: "[proxy]\nconnect_ports = [\(target.port)]\n")
            let slow = try RawOrigin()
            slow.script(
                "127.0.0.1:\(target.port)",
                RawOrigin.Script(pieces: [Array("HTTP/1.1 ".utf8), Array("200 Connection established\r\n\r\n".utf8)], pause: 4))
            let garbled = try RawOrigin()
            garbled.script("127.0.0.1:\(target.port)", RawOrigin.Script("SSH-2.0-OpenSSH_9.6\r\n\r\n"))
            for (first, status) in [(slow.port, 504), (garbled.port, 502)] {
                let child = try Larder(
                    config: """
                        [proxy]
                        connect_ports = [\(target.port)]
                        [upstream]
                        connect_timeout = "1s"
                        parents = ["http://127.0.0.1:\(first)", "http://127.0.0.1:\(live.proxyPort)"]
                        parent_selection = "failover"
                        """)
                let (connection, response) = try Tunnels.connect(child, to: target.port)
                #expect(response.status == status, "parent on \(first)")
                _ = connection
                let metrics = try Curl.run(["http://127.0.0.1:\(child.adminPort)/metrics"]).text
                #expect(metricValue(metrics, "larder_parent_failovers_total") == 0)
                #expect(metricValue(metrics, "larder_parent_failures_total{parent=\"http://127.0.0.1:\(first)\"}") == 0)
            }
            #expect(slow.count("127.0.0.1:\(target.port)") == 1)
            #expect(garbled.count("127.0.0.1:\(target.port)") == 1)
            #expect(try live.stats().tunnels.opened == 0, "the second parent was never asked")
        }

        @Test func connectThroughABrokenParentFailsWithAClearStatus() throws {
            let target = try TunnelTarget(.tls)
            // A "parent" that reads our CONNECT as an unknown command and hangs up (a clean close
            // or a reset, depending on timing: both mean it cannot carry the tunnel).
            let mute = try TunnelTarget(.raw)
            /// A Larder that tunnels to the target through `parent`.
            func child(parent: String, _ extra: String = "") throws -> Larder {
                try Larder(config: "[proxy]\nconnect_ports = [\(target.port)]\n[upstream]\nparent = \"\(parent)\"\n" + extra)
            }
            let closes = try child(parent: "http://127.0.0.1:\(mute.port)")
            #expect(try Tunnels.connect(closes, to: target.port).1.status == 502)
            _ = try closes.child.waitForOutput {
                $0.contains("parent proxy unreachable") && $0.contains("parent=http://127.0.0.1:\(mute.port)")
            }
            let metrics = try Curl.run(["http://127.0.0.1:\(closes.adminPort)/metrics"]).text
            #expect(metricValue(metrics, "larder_parent_failures_total{parent=\"http://127.0.0.1:\(mute.port)\"}") == 1)

            // A parent that never accepts: the client hears 504 within connect_timeout.
            let blackhole = try TunnelTarget(.blackhole)
            let waits = try child(parent: "http://127.0.0.1:\(blackhole.port)", "connect_timeout = \"1s\"\n")
            #expect(try Tunnels.connect(waits, to: target.port).1.status == 504)

            // A SOCKS parent serves misses through libcurl but cannot carry Larder's tunnels.
            let socks = try child(parent: "socks5://127.0.0.1:\(mute.port)")
            #expect(try Tunnels.connect(socks, to: target.port).1.status == 502)
        }

        // MARK: HAProxy

        @Test func haproxyClusterKeepsEachURLOnOneNodeAndMovesOnlyAStoppedNodesShare() throws {
            let origin = try Origin()
            var nodes = [try Larder(), try Larder(), try Larder()]
            let haproxy = try HAProxy(nodes: nodes)
            let paths = (0..<30).map { "/c\($0)?cc=max-age=600&size=2000" }
            for path in paths {
                #expect(try Curl.viaProxy(haproxy.proxy, [origin.url(path)]).status == 200)
            }
            for path in paths {
                let again = try Curl.viaProxy(haproxy.proxy, [origin.url(path)])
                #expect(again.cacheStatus?.hit == true, "\(path) hits on its node")
            }
            #expect(try origin.total() == paths.count, "one origin request per URL across the cluster")
            var home: [String: Int] = [:]
            for path in paths {
                let holders = try nodes.indices.filter { try Self.holds(nodes[$0], origin.url(path)) }
                #expect(holders.count == 1, "\(path) is stored on exactly one node: \(holders)")
                home[path] = holders.first
            }
            let shares = nodes.indices.map { index in home.values.filter { $0 == index }.count }
            #expect(shares.allSatisfy { $0 > 0 }, "every node owns some URLs: \(shares)")

            // The admin endpoints of each node, through HAProxy's admin frontend.
            for index in nodes.indices {
                let stats = try Curl.run(["http://127.0.0.1:\(haproxy.adminPort)/node\(index + 1)/stats"])
                #expect(stats.status == 200)
                let entries = try StatsDocument.decode(Array(stats.body)).memory.entries
                #expect(entries == shares[index], "node\(index + 1)'s stats through HAProxy")
            }

            // Stop the node with the most URLs; its URLs move, the others keep hitting.
            let stopped = shares.indices.max { shares[$0] < shares[$1] }!
            #expect(nodes[stopped].stop() == 0)
            _ = try waitUntil(seconds: 10) { try haproxy.serverIsDown("node\(stopped + 1)") }
            var refetched = 0
            for path in paths {
                let response = try Curl.viaProxy(haproxy.proxy, [origin.url(path)])
                #expect(response.status == 200)
                if home[path] == stopped {
                    #expect(response.cacheStatus?.hit == false, "\(path) moved to another node")
                    refetched += 1
                } else {
                    #expect(response.cacheStatus?.hit == true, "\(path) stays on its node")
                }
            }
            #expect(refetched == shares[stopped])
            print("cluster: URLs per node \(shares); stopped node\(stopped + 1), \(refetched) of \(paths.count) URLs moved")
            #expect(try origin.total() == paths.count + shares[stopped], "only the stopped node's share went to the origin again")
            nodes.remove(at: stopped)
        }

        @Test func purgeReachesTheNodeThatHoldsTheURL() throws {
            let origin = try Origin()
            let nodes = [try Larder(), try Larder(), try Larder()]
            let haproxy = try HAProxy(nodes: nodes)
            let url = origin.url("/purge-me?cc=max-age=600")
            #expect(try Curl.viaProxy(haproxy.proxy, [url]).status == 200)
            #expect(try nodes.filter { try Self.holds($0, url) }.count == 1)
            let cluster = nodes.map { "127.0.0.1:\($0.adminPort)" }.joined(separator: ",")
            let purge = try ChildProcess(Paths.larder, ["purge", "--cluster", cluster, url], environment: ["PATH": "/usr/bin:/bin"])
            purge.waitUntilExit()
            #expect(purge.terminationStatus == 0, "\(purge.stderr)")
            #expect(purge.stdout.contains("1 of 3 nodes held \(url)"))
            #expect(try nodes.filter { try Self.holds($0, url) }.isEmpty)
            let again = try Curl.viaProxy(haproxy.proxy, [url])
            #expect(again.cacheStatus?.fwd == "uri-miss")
            #expect(try origin.total() == 2)
        }

        /// Whether `larder` has `url` stored: `only-if-cached` answers 504 otherwise (RFC 9111
        /// §5.2.1.7), without touching the origin.
        static func holds(_ larder: Larder, _ url: String) throws -> Bool {
            let response = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", url])
            return response.status == 200
        }
    }
}

/// The real HAProxy running `config/cluster/haproxy.cfg`, with the example node addresses and
/// ports replaced by the test's Larder processes and free loopback ports.
final class HAProxy {
    let child: ChildProcess
    let proxyPort: Int
    let adminPort: Int
    private let statsSocket: String
    private let directory: String

    init(nodes: [Larder]) throws {
        directory = Paths.temporaryDirectory()
        proxyPort = try freePort()
        adminPort = try freePort()
        statsSocket = directory + "/haproxy.sock"
        var text = try String(contentsOfFile: Paths.root + "/config/cluster/haproxy.cfg", encoding: .utf8)
        text = text.replacingOccurrences(of: "bind *:3128", with: "bind 127.0.0.1:\(proxyPort)")
        text = text.replacingOccurrences(of: "bind 127.0.0.1:3129", with: "bind 127.0.0.1:\(adminPort)")
        text = text.replacingOccurrences(
            of: "log stdout format raw local0 info", with: "log stdout format raw local0 info\n    stats socket \(statsSocket) level admin")
        // The shipped file lists three nodes; the test runs exactly as many.
        guard nodes.count == 3 else { throw TestFailure("the shipped haproxy.cfg has three nodes") }
        for (index, node) in nodes.enumerated() {
            let example = "10.0.0.\(index + 1)"
            text = text.replacingOccurrences(of: "\(example):3128 port 3129", with: "127.0.0.1:\(node.proxyPort) port \(node.adminPort)")
            text = text.replacingOccurrences(of: "\(example):3129", with: "127.0.0.1:\(node.adminPort)")
        }
        guard !text.contains("10.0.0.") else { throw TestFailure("haproxy.cfg changed shape; update the test") }
        // Health checks every 200 ms so a stopped node is noticed quickly.
        text = text.replacingOccurrences(of: "inter 1s", with: "inter 200ms")
        let path = directory + "/haproxy.cfg"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        child = try ChildProcess("/usr/sbin/haproxy", ["-db", "-f", path])
        // Ready once both frontends accept and every node has passed its health check.
        let ready = try waitUntil(seconds: 15) {
            guard self.child.isRunning else { return false }
            return try (1...3).allSatisfy { try !self.serverIsDown("node\($0)") }
        }
        guard ready else { throw TestFailure("haproxy did not come up: \(child.stdout)\(child.stderr)") }
    }

    var proxy: String { "http://127.0.0.1:\(proxyPort)" }

    /// Asks HAProxy's runtime API whether a server of the proxy backend is down.
    func serverIsDown(_ name: String) throws -> Bool {
        let child = try ChildProcess(
            "/bin/sh", ["-c", "echo 'show servers state larder_nodes' | /usr/bin/python3 -c \"\(Self.socketClient)\" \(statsSocket)"])
        child.waitUntilExit()
        // Columns: be_id be_name srv_id srv_name srv_addr srv_op_state ...; 2 = running.
        for line in child.stdout.split(separator: "\n") {
            let columns = line.split(separator: " ")
            if columns.count > 5, columns[3] == name { return columns[5] != "2" }
        }
        return true
    }

    /// A few lines of Python that send stdin to a Unix socket and print the answer (socat is
    /// not installed everywhere).
    private static let socketClient =
        "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); "
        + "print(b''.join(iter(lambda: s.recv(65536), b'')).decode())"

    deinit {
        _ = child.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

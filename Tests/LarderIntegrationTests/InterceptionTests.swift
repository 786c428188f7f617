import Foundation
import Glibc
import LarderServer
import Testing

/// What an HTTPS interception test runs against: certificates made by Fixtures/tls_certs.sh,
/// a Larder CA made by `larder ca init` for `localhost`, and TLS origins on 127.0.0.1 that
/// answer as `localhost` (a name, since `tls.intercept` lists names only, that resolves here
/// without touching /etc/hosts).
struct InterceptionSetup {
    let directory: String
    /// Larder's CA certificate: what intercepted clients trust.
    var larderCA: String { directory + "/ca/ca.pem" }
    /// The origins' CA: what Larder trusts through `tls.upstream_ca_file`.
    var originCA: String { directory + "/origin-ca.pem" }

    init() throws {
        directory = Paths.temporaryDirectory()
        let made = try ChildProcess("/bin/sh", [Paths.root + "/Tests/LarderIntegrationTests/Fixtures/tls_certs.sh", directory])
        made.waitUntilExit()
        guard made.terminationStatus == 0 else { throw TestFailure("tls_certs.sh failed: \(made.stderr)") }
        try "[tls]\nintercept = [\"localhost\"]\n".write(toFile: directory + "/ca.toml", atomically: true, encoding: .utf8)
        let ca = try ChildProcess(Paths.larder, ["ca", "init", "--config", directory + "/ca.toml", "--dir", directory + "/ca"])
        ca.waitUntilExit()
        guard ca.terminationStatus == 0 else { throw TestFailure("larder ca init failed: \(ca.stderr)") }
    }

    /// A TLS origin serving `certificate` (`localhost`, `wrongname`, `expired`, `untrusted`).
    func origin(_ certificate: String = "localhost") throws -> Origin {
        try Origin(tls: (directory + "/\(certificate).pem", directory + "/\(certificate).key", originCA))
    }

    /// Larder's config: intercept `localhost` (unless `intercept` says otherwise), trust the
    /// origins' CA, allow CONNECT to `ports`.
    func config(ports: [Int], intercept: String = "[\"localhost\"]", extra: String = "", proxy: String = "") -> String {
        """
        [proxy]
        connect_ports = [\(ports.map(String.init).joined(separator: ", "))]
        \(proxy)
        [tls]
        intercept = \(intercept)
        ca_dir = "\(directory)/ca"
        upstream_ca_file = "\(originCA)"
        \(extra)
        """
    }

    /// curl through `larder` to `url`, trusting Larder's CA (or `trusting` instead).
    func curl(_ larder: Larder, _ url: String, trusting: String? = nil, _ extra: [String] = []) throws -> Curl.Result {
        try Curl.viaProxy(larder.proxy, ["--cacert", trusting ?? larderCA] + extra + [url])
    }

    /// Runs Fixtures/tls_clients.py and decodes its JSON line.
    func clients(_ arguments: [String]) throws -> [String: Any] {
        let child = try ChildProcess(
            "/usr/bin/env", ["python3", Paths.root + "/Tests/LarderIntegrationTests/Fixtures/tls_clients.py"] + arguments)
        child.waitUntilExit()
        guard child.terminationStatus == 0, let line = child.stdout.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else { throw TestFailure("tls_clients.py \(arguments.first ?? ""): \(child.stderr) \(child.stdout)") }
        return object
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

extension Larder {
    /// The `tls` section of /stats.
    func tlsStats() throws -> StatsDocument.TLS { try stats().tls }

    func handshakes(_ outcome: String) throws -> Int { try tlsStats().handshakes[outcome] ?? -1 }
}

extension IntegrationTests {
    /// HTTPS interception end to end: real TLS origins, curl, Python and pip as clients, the
    /// real binary in between (issue 30's list).
    @Suite(.timeLimit(.minutes(4))) struct Interception {
        @Test func curlMissThenHitAcrossTwoProcessesWithOneOriginRequest() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let path = "/pkg.tar.gz?size=200000&cc=max-age=600"
            let first = try setup.curl(larder, origin.url(path))
            #expect(first.exitCode == 0, "\(first.stderr)")
            #expect(first.status == 200 && first.body.count == 200_000)
            #expect(first.header("cache-status")?.contains("fwd=uri-miss") == true, "\(first.headers)")
            let second = try setup.curl(larder, origin.url(path))
            #expect(second.status == 200 && second.body == first.body)
            #expect(second.header("cache-status")?.hasPrefix("larder; hit") == true, "\(second.headers)")
            #expect(try origin.count(path) == 1, "the second client was answered from the cache")
            #expect(first.body == (try origin.directBody("/pkg.tar.gz?size=200000&cc=max-age=601")), "the bytes are the origin's")

            let tls = try larder.tlsStats()
            #expect(try larder.handshakes("ok") == 2)
            #expect(tls.certificatesMinted == 1 && tls.certificateCacheHits == 1, "\(tls)")
            let requests = tls.requests
            #expect(requests["miss"] == 1 && requests["hit"] == 1, "\(requests)")
            #expect(tls.bodyPath == "copy" || tls.kernelSessions == 2, "\(tls)")
            let table = try ChildProcess(Paths.larder, ["stats", "--admin", "127.0.0.1:\(larder.adminPort)"])
            table.waitUntilExit()
            #expect(table.stdout.contains("2 requests inside") && table.stdout.contains("handshakes ok 2"), "\(table.stdout)")
            // The access log marks requests that came inside a TLS session, with their URL.
            try larder.child.waitForOutput(stream: \.stdout) {
                $0.contains("\"GET \(origin.url(path))\" 200 hit") && $0.contains("tls=TLSv1.3")
            }
            #expect(larder.child.stdout.contains("\"CONNECT localhost:\(origin.port)\" 200 intercept"))
            // The keys never mix schemes: the same host, port and path over plain HTTP is not
            // that entry (it goes upstream, where a TLS port does not speak plain HTTP).
            let plain = try Curl.viaProxy(larder.proxy, ["http://localhost:\(origin.port)\(path)"])
            #expect(plain.status == 502 && plain.header("cache-status")?.contains("hit") == false, "\(plain.headers)")
        }

        /// With several loops, an intercepted request accepted on a loop other than the one
        /// fetching its URL moves there with its TLS session and is answered from that fill.
        /// Which loop accepts each connection is the kernel's choice, so the burst is repeated,
        /// on a new URL, until some request had to move (3 bursts at most).
        @Test func anInterceptedRequestMovesToTheFetchingLoopWithItsSession() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "workers = 4"))
            var moved = 0
            for burst in 0..<3 {
                let path = "/moving?delay=1&size=20000&cc=max-age=60&id=\(burst)"
                let directory = Paths.temporaryDirectory()
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let clients = 12
                var arguments = [
                    "--silent", "--max-time", "20", "--parallel", "--parallel-immediate", "--parallel-max", "\(clients)",
                    "--proxy", larder.proxy, "--cacert", setup.larderCA,
                ]
                for index in 0..<clients { arguments += ["-o", "\(directory)/\(index)", origin.url(path)] }
                let curl = try ChildProcess("/usr/bin/curl", arguments)
                curl.waitUntilExit()
                #expect(curl.terminationStatus == 0, "\(curl.stderr)")
                let expected = try origin.directBody(path)
                for index in 0..<clients {
                    #expect(FileManager.default.contents(atPath: "\(directory)/\(index)") == expected, "client \(index)")
                }
                #expect(try origin.count(path) == 2, "one request through the proxy, one direct")
                moved = try larder.stats().coalescing.moved
                if moved > 0 { break }
            }
            #expect(moved > 0, "12 intercepted clients over 4 loops: those off the fetching loop moved to it")
            #expect(try larder.handshakes("ok") >= 12)
        }

        /// Routes apply inside a session: one matching `https://` overrides the origin's
        /// no-cache, as it would for plain HTTP.
        @Test func anHTTPSRouteAppliesToInterceptedRequests() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let route = "[[route]]\nmatch = \"https://localhost:*/immutable/*\"\npolicy = \"cache_first\"\nttl = \"1h\"\n"
            let larder = try Larder(config: setup.config(ports: [origin.port]) + "\n" + route)
            for path in ["/immutable/a.whl?cc=no-cache", "/other/a.whl?cc=no-cache"] {
                for _ in 1...2 { #expect(try setup.curl(larder, origin.url(path)).status == 200) }
            }
            #expect(try origin.count("/immutable/a.whl?cc=no-cache") == 1, "the route's cache_first kept it")
            #expect(try origin.count("/other/a.whl?cc=no-cache") == 2, "without the route, no-cache is obeyed")
        }

        /// With proxy authentication, the CONNECT carries the credentials; the requests inside
        /// the session (sent as to the origin) need none, and the origin never sees them.
        @Test func proxyCredentialsOnTheConnectCoverTheRequestsInside() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let alice = try hashPassword(user: "alice", password: "correct horse")
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "auth_users = [\"\(alice)\"]"))
            let refused = try setup.curl(larder, origin.url("/private"))
            #expect(refused.exitCode != 0, "no credentials: the CONNECT gets 407 \(refused.stderr)")
            #expect(try larder.handshakes("ok") == 0)
            let allowed = try setup.curl(larder, origin.url("/private"), ["--proxy-user", "alice:correct horse"])
            #expect(allowed.status == 200, "\(allowed.stderr)")
            #expect(
                try origin.requests().allSatisfy { request in !request.headers.contains { $0.0.lowercased() == "proxy-authorization" } })
        }

        @Test func pythonAndPipDownloadFromATLSIndexTheSecondRunFromTheCache() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let wheel = try setup.clients(["wheel", "demo_pkg", "1.0"])
            let file = wheel["file"] as? String ?? ""
            let digest = wheel["sha256"] as? String ?? ""
            // A PyPI-shaped index (PEP 503): /simple/<project>/ links the file with its hash.
            let page = "<!DOCTYPE html><html><body><a href=\"/files/\(file)#sha256=\(digest)\">\(file)</a></body></html>"
            try origin.script(
                "/simple/demo-pkg/",
                [.init(status: 200, headers: [("Content-Type", "text/html"), ("Cache-Control", "max-age=600")], body: page)],
                conditional: false)
            try origin.script(
                "/files/\(file)",
                [
                    .init(
                        status: 200, headers: [("Content-Type", "application/octet-stream"), ("Cache-Control", "max-age=86400")],
                        body64: wheel["body64"] as? String)
                ],
                conditional: false)

            // Python's urllib through HTTPS_PROXY, trusting Larder's CA.
            let python = try ChildProcess(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    "import ssl,urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], context=ssl.create_default_context(cafile=sys.argv[2])).read().decode())",
                    origin.url("/simple/demo-pkg/"), setup.larderCA,
                ],
                environment: ["HTTPS_PROXY": larder.proxy, "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": setup.directory])
            python.waitUntilExit()
            #expect(python.terminationStatus == 0 && python.stdout.contains(file), "\(python.stderr)")

            for run in 1...2 {
                let destination = setup.directory + "/download-\(run)"
                let pip = try ChildProcess(
                    "/usr/bin/env",
                    [
                        "python3", "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                        "--index-url", origin.url("/simple/"), "--dest", destination, "demo-pkg",
                    ],
                    environment: [
                        "HTTPS_PROXY": larder.proxy, "PIP_CERT": setup.larderCA, "HOME": setup.directory,
                        "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                    ])
                pip.waitUntilExit()
                #expect(pip.terminationStatus == 0, "pip run \(run): \(pip.stdout) \(pip.stderr)")
                #expect(FileManager.default.fileExists(atPath: destination + "/" + file), "pip run \(run) saved the wheel")
            }
            #expect(try origin.count("/files/\(file)") == 1, "the second pip run got the wheel from the cache")
            // pip asks for index pages with Cache-Control: max-age=0, so those are revalidated.
        }

        @Test(arguments: ["untrusted", "expired", "wrongname"])
        func anOriginWhoseCertificateFailsGets502AndNothingIsStored(_ certificate: String) throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin(certificate)
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            for _ in 1...2 {
                let result = try setup.curl(larder, origin.url("/x?cc=max-age=600"))
                #expect(result.exitCode == 0, "the client trusts Larder's certificate: \(result.stderr)")
                #expect(result.status == 502, "\(certificate)")
                let cacheStatus = result.header("cache-status") ?? ""
                #expect(cacheStatus.contains("detail=\"tls: "), "\(cacheStatus)")
            }
            let stats = try larder.stats()
            #expect(stats.memory.entries == 0, "nothing stored")
            #expect(stats.disk?.entries == 0)
            #expect(stats.upstream.failures["tls"] == 2)
        }

        @Test func aClientThatRejectsTheCertificateIsCountedThenSplicedAndSucceedsBlind() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], extra: "splice_after_failures = 2\nsplice_for = \"1h\""))
            // This client trusts only the origin's CA, as a client pinning the real site would.
            for attempt in 1...2 {
                let refused = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA)
                #expect(refused.exitCode != 0, "attempt \(attempt) fails the handshake")
            }
            try larder.child.waitForOutput { $0.contains("tunnelling it blind") }
            #expect(try larder.handshakes("rejected") == 2)
            let logged = larder.child.stderr
            #expect(logged.contains("TLS handshake with an intercepted client failed") && logged.contains("host=localhost"))
            #expect(logged.contains("unknown ca"), "the client's alert is logged: \(logged)")
            let failing = try larder.tlsStats().failingHosts.first
            #expect(failing?.host == "localhost" && failing?.failures == 2 && failing?.spliced == true)

            let through = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA)
            #expect(through.exitCode == 0 && through.status == 200, "spliced: a blind tunnel to the real origin \(through.stderr)")
            #expect(try origin.count("/pinned") == 1)
            let tls = try larder.tlsStats()
            #expect(tls.splicedTunnels == 1 && tls.splicedHosts == 1, "\(tls)")
            #expect(larder.child.stderr.components(separatedBy: "tunnelling it blind").count == 2, "the splice is logged once")
        }

        @Test func anSNIOtherThanTheConnectHostIsRefusedAndANeverHostIsTunnelled() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            // CONNECT localhost, then a ClientHello for another name.
            let other = try setup.curl(
                larder, "https://other.localhost:\(origin.port)/x",
                ["--connect-to", "other.localhost:\(origin.port):localhost:\(origin.port)"])
            #expect(other.exitCode != 0)
            #expect(try larder.handshakes("failed") == 1)
            try larder.child.waitForOutput { $0.contains("the client asked for other.localhost, not localhost") }

            // A Host other than the CONNECT target, inside the session: 421, not a request elsewhere.
            let misdirected = try setup.curl(larder, origin.url("/x"), ["-H", "Host: other.example"])
            #expect(misdirected.status == 421, "\(misdirected.status)")
            #expect(try origin.total() == 0)

            let never = try Larder(config: setup.config(ports: [origin.port], extra: "never = [\"localhost\"]"))
            let blind = try setup.curl(never, origin.url("/y"), trusting: setup.originCA)
            #expect(blind.exitCode == 0 && blind.status == 200, "tunnelled to the origin itself: \(blind.stderr)")
            #expect(try never.handshakes("ok") == 0 && (try never.stats().tunnels.opened) == 1)
        }

        @Test func fiftyTLSAndFiftyPlainClientsOnOneColdURLMakeOneOriginRequest() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let path = "/cold?delay=1&size=100000&cc=max-age=600"
            let seen = try setup.clients(["mixed", "\(larder.proxyPort)", "localhost", "\(origin.port)", setup.larderCA, path, "50"])
            let tls = seen["tls"] as? [Any] ?? []
            let plain = seen["plain"] as? [Any] ?? []
            #expect(tls.count == 50 && tls.allSatisfy { $0 as? Int == 200 }, "\(tls)")
            #expect(plain.count == 50 && plain.allSatisfy { $0 as? Int == 200 }, "\(plain)")
            #expect(try origin.count(path) == 1, "one fill for both kinds of client")
        }

        @Test func aHundredRequestsOnOneTLSKeepAliveConnection() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let path = "/ka?size=5000&cc=max-age=600"
            let seen = try setup.clients(["keepalive", "\(larder.proxyPort)", "localhost", "\(origin.port)", setup.larderCA, path, "100"])
            let statuses = seen["statuses"] as? [Int] ?? []
            #expect(statuses.count == 100 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
            #expect(seen["bytes"] as? Int == 500_000)
            #expect(try origin.count(path) == 1)
            #expect(try larder.stats().requests["intercept"] == 1, "one CONNECT")
            #expect(try larder.handshakes("ok") == 1, "one session")
            #expect(try larder.tlsStats().requests["hit"] == 99)
        }

        @Test func hostileClientHellosAreRefusedWithinTheHeaderTimeoutAndNothingLeaks() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "header_timeout = \"1s\""))
            func intercepted() throws -> RawConnection {
                let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 5)
                connection.send("CONNECT localhost:\(origin.port) HTTP/1.1\r\nHost: localhost:\(origin.port)\r\n\r\n")
                let answer = try connection.readResponse(headRequest: true)
                #expect(answer.status == 200)
                return connection
            }
            let start = Date()
            // Not TLS at all.
            let garbage = try intercepted()
            garbage.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(garbage.peerClosed(), "closed")
            // A record header that promises an oversized handshake, then junk.
            let oversized = try intercepted()
            oversized.send([0x16, 0x03, 0x01, 0xff, 0xff] + [UInt8](repeating: 0x41, count: 70_000))
            #expect(oversized.peerClosed())
            // The start of a ClientHello, then silence.
            let slow = try intercepted()
            slow.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            #expect(slow.peerClosed(), "closed by header_timeout")
            #expect(Date().timeIntervalSince(start) < 4)
            // Bytes sent before the 200 arrived cannot reach the handshake: refused, not misread.
            let early = try RawConnection(port: larder.proxyPort, receiveTimeout: 5)
            early.send("CONNECT localhost:\(origin.port) HTTP/1.1\r\nHost: localhost\r\n\r\n\u{16}\u{03}\u{01}")
            #expect(try early.readResponse(headRequest: true).status == 200)
            #expect(early.peerClosed())

            #expect(try larder.handshakes("failed") >= 2)
            #expect(try larder.handshakes("timeout") == 1)
            #expect(try larder.activeConnections() == 0, "nothing left open")
            // And the proxy still serves.
            let fine = try setup.curl(larder, origin.url("/after"))
            #expect(fine.status == 200)
            #expect(try larder.handshakes("ok") == 1, "still intercepted: junk does not splice a host")
        }

        /// A large body moves to a memory file on its first hit; later intercepted hits, whole
        /// and ranged, carry its bytes through the session (without kTLS, written from the
        /// file's mapping).
        @Test func hitsFromAMemoryFileGoThroughTheSessionWhole() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let path = "/wheel.whl?size=300000&cc=max-age=600"
            let direct = try origin.directBody("/wheel.whl?size=300000&cc=max-age=601")  // the same bytes, another key
            #expect(try setup.curl(larder, origin.url(path)).body == direct)
            #expect(try setup.curl(larder, origin.url(path)).body == direct)
            for _ in 0..<100 where try larder.stats().memory.files == 0 { usleep(20_000) }
            #expect(try larder.stats().memory.files == 1, "moved to a memory file on its first hit")
            for _ in 0..<3 {
                let hit = try setup.curl(larder, origin.url(path))
                #expect(hit.status == 200 && hit.body == direct, "\(hit.headers)")
                #expect(hit.header("cache-status")?.hasPrefix("larder; hit") == true, "\(hit.headers)")
            }
            let range = try setup.curl(larder, origin.url(path), ["-r", "100000-250000"])
            #expect(range.status == 206 && range.body == direct.subdata(in: 100_000..<250_001))
            #expect(try origin.count(path) == 1)
        }

        @Test func aRestartKeepsTheHTTPSEntriesOnDisk() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let cache = setup.directory + "/cache"
            let path = "/kept?size=50000&cc=max-age=600"
            do {
                let larder = try Larder(config: setup.config(ports: [origin.port]), cacheDirectory: cache)
                #expect(try setup.curl(larder, origin.url(path)).status == 200)
                #expect(larder.stop() == 0)
            }
            let restarted = try Larder(config: setup.config(ports: [origin.port]), cacheDirectory: cache)
            let again = try setup.curl(restarted, origin.url(path))
            let direct = try origin.directBody("/kept?size=50000&cc=max-age=601")  // the same bytes, another key
            #expect(again.status == 200 && again.body == direct, "the disk body, intact through the session")
            #expect(again.header("cache-status")?.contains("detail=disk") == true, "\(again.headers)")
            #expect(try origin.count(path) == 1)
        }
    }
}

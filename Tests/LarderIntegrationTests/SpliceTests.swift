import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// A splice belongs to the client that refused the certificate (issue 57): other clients of
    /// the same host stay intercepted, and connections that never saw the certificate count
    /// for nothing. Clients from two loopback addresses, 127.0.0.1 and 127.0.0.2.
    @Suite(.timeLimit(.minutes(4))) struct Splices {
        @Test func threeRefusalsFrom127_0_0_2SpliceThatClientOnlyAnd127_0_0_1StaysIntercepted() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let pinning = ["--interface", "127.0.0.2"]
            // This client trusts only the origin's CA (it pins the real site): it refuses Larder's.
            for attempt in 1...3 {
                let refused = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning)
                #expect(refused.exitCode != 0, "attempt \(attempt) fails the handshake")
            }
            try larder.child.waitForOutput { $0.contains("tunnelling it blind") }
            #expect(larder.child.stderr.contains("client 127.0.0.2 keeps refusing the certificate for localhost"))
            #expect(larder.child.stderr.contains("larder tls clear localhost ends this"), "the warning says how to end it")

            // The refusing client is tunnelled blind to the real origin...
            let blind = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning)
            #expect(blind.exitCode == 0 && blind.status == 200, "spliced for 127.0.0.2: \(blind.stderr)")
            #expect(blind.header("Cache-Status") == nil, "not through Larder's cache")
            // ...while a client from 127.0.0.1 is still shown Larder's certificate and cached.
            let other = try setup.curl(larder, origin.url("/shared?cc=max-age=600"))
            #expect(other.exitCode == 0 && other.status == 200, "127.0.0.1 still intercepted: \(other.stderr)")
            #expect(other.header("Cache-Status")?.contains("larder") == true)
            let pinnedOther = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA)
            #expect(pinnedOther.exitCode != 0, "127.0.0.1 is shown Larder's certificate, not the origin's")
            #expect(try larder.handshakes("ok") == 1)
            let tls = try larder.tlsStats()
            #expect(tls.splicedHosts == 1 && tls.splicedTunnels == 1, "\(tls)")
            let failing = tls.failingHosts.first
            #expect(failing?.splicedClients == 1, "\(tls)")
            // Metrics per tls.intercept entry (a label clients cannot multiply).
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("larder_tls_spliced_clients{intercept=\"localhost\"} 1"), "\(metrics)")
            #expect(
                metrics.contains("larder_tls_certificate_refusals_total{intercept=\"localhost\"} 4"),
                "three from 127.0.0.2, one from 127.0.0.1")
            #expect(metrics.contains("larder_tls_handshake_failures_total{intercept=\"localhost\"} 4"))
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
                try metrics.write(toFile: setup.directory + "/metrics.txt", atomically: true, encoding: .utf8)
                let promtool = try ChildProcess("/bin/sh", ["-c", "/usr/bin/promtool check metrics < \(setup.directory)/metrics.txt"])
                promtool.waitUntilExit()
                #expect(promtool.terminationStatus == 0, "promtool: \(promtool.stdout)\(promtool.stderr)")
            }
            // The dashboard badges an active splice (where a headless Chromium is installed).
            if let (dom, _) = try Operations.renderDashboard(larder) {
                #expect(dom.contains("<span class=\"badge\">TLS spliced: 1 host (GET /tls)</span>"), "\(dom.prefix(2000))")
            }
        }

        @Test func tenConnectionsClosedOrResetRightAfterThe200SpliceNoOne() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            let seen = try setup.clients(["abort", "\(larder.proxyPort)", "localhost", "\(origin.port)", "10"])
            let answers = seen["answers"] as? [String] ?? []
            #expect(answers.count == 10 && answers.allSatisfy { $0.contains(" 200") }, "\(answers)")
            // Every one of them ended as a failed handshake before the next client comes.
            let deadline = Date().addingTimeInterval(10)
            while try larder.handshakes("closed") + larder.handshakes("failed") < 10, Date() < deadline { usleep(50_000) }
            #expect(try larder.handshakes("closed") + larder.handshakes("failed") == 10)

            let fine = try setup.curl(larder, origin.url("/after"))
            #expect(fine.exitCode == 0 && fine.status == 200, "still intercepted: \(fine.stderr)")
            #expect(fine.header("Cache-Status")?.contains("larder") == true)
            #expect(try larder.handshakes("ok") == 1)
            #expect(try larder.tlsStats().splicedHosts == 0)
            #expect(!larder.child.stderr.contains("tunnelling it blind"))
        }

        @Test func closingAfterTheCertificateArrivedCountsAsARefusalOfThatClientOnly() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port]))
            // A pinning client that hangs up without an alert once it has seen the certificate.
            let seen = try setup.clients(["hello-close", "\(larder.proxyPort)", "localhost", "\(origin.port)", "127.0.0.2", "3"])
            let flights = seen["flights"] as? [Int] ?? []
            #expect(flights.count == 3 && flights.allSatisfy { $0 > 0 }, "the server's flight arrived: \(seen)")
            try larder.child.waitForOutput { $0.contains("tunnelling it blind") }
            #expect(try larder.handshakes("closed") == 3)
            let blind = try setup.curl(larder, origin.url("/x"), trusting: setup.originCA, ["--interface", "127.0.0.2"])
            #expect(blind.exitCode == 0 && blind.status == 200, "127.0.0.2 spliced: \(blind.stderr)")
            let other = try setup.curl(larder, origin.url("/x"))
            #expect(other.exitCode == 0 && other.header("Cache-Status")?.contains("larder") == true, "127.0.0.1 intercepted")
        }

        @Test func getTLSAndLarderTLSListTheSpliceAndDeleteWithTheTokenEndsIt() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(
                config: setup.config(ports: [origin.port], extra: "splice_after_failures = 2\n[admin]\ntoken = \"s3cret\""))
            let pinning = ["--interface", "127.0.0.2"]
            for _ in 1...2 { _ = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning) }
            try larder.child.waitForOutput { $0.contains("tunnelling it blind") }

            let listed = try CacheAdmin.admin(larder, "GET", "/tls")
            #expect(listed.status == 200, "\(listed.status) \(listed.text)")
            let document = try JSONSerialization.jsonObject(with: listed.body) as? [String: Any]
            let splice = (document?["splices"] as? [[String: Any]])?.first
            #expect(splice?["host"] as? String == "localhost" && splice?["client"] as? String == "127.0.0.2", "\(listed.text)")
            #expect(splice?["failures"] as? Int == 2 && (splice?["reason"] as? String)?.contains("unknown ca") == true)
            let left = splice?["seconds_left"] as? Int ?? 0
            #expect(left > 3500 && left <= 3600, "until when: \(listed.text)")
            #expect(((document?["failing_hosts"] as? [[String: Any]])?.first)?["refusals"] as? Int == 2)

            let admin = ["--admin", "127.0.0.1:\(larder.adminPort)", "--token", "s3cret"]
            let cli = try CacheAdmin.larderCLI(["tls"] + admin)
            #expect(cli.status == 0 && cli.out.contains("localhost  client 127.0.0.2"), "\(cli.out) \(cli.err)")

            #expect(try CacheAdmin.admin(larder, "DELETE", "/tls/splices?host=localhost").status == 401, "the token is required")
            #expect(try CacheAdmin.admin(larder, "DELETE", "/tls/splices", token: "s3cret").status == 400, "a host is required")
            let unset = try CacheAdmin.larderCLI(["tls", "clear", "localhost", "--client", ""] + admin)
            #expect(unset.status != 0 && unset.err.contains("400"), "an empty client= ends nothing: \(unset.out) \(unset.err)")
            let other = try CacheAdmin.larderCLI(["tls", "clear", "localhost", "--client", "127.0.0.9"] + admin)
            #expect(other.status == 0 && other.out.contains("ended 0 splices"), "\(other.out) \(other.err)")
            let cleared = try CacheAdmin.larderCLI(["tls", "clear", "localhost", "--client", "127.0.0.2"] + admin)
            #expect(cleared.status == 0 && cleared.out.contains("ended 1 splice of localhost"), "\(cleared.out) \(cleared.err)")
            let empty = try JSONSerialization.jsonObject(with: try CacheAdmin.admin(larder, "GET", "/tls").body) as? [String: Any]
            #expect((empty?["splices"] as? [Any])?.isEmpty == true)
            // Intercepted again: the pinning client is shown Larder's certificate once more.
            let again = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning)
            #expect(again.exitCode != 0)
            #expect(try larder.handshakes("rejected") == 3)
        }

        /// Issue 57: refusing Larder's certificate for many names under a `*.` entry used to fill
        /// the table of (client, host) pairs (16,384) and push out other clients' counts and
        /// splices, the oldest first: a pinning client never reached its splice. A client's
        /// address now holds at most 64 pairs, making room among its own.
        @Test func aClientRefusingTheCertificateFor100NamesKeeps64SplicesAndAnothersSpliceStays() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(
                config: setup.config(
                    ports: [origin.port], intercept: "[\"localhost\", \"*.localhost\"]", extra: "splice_after_failures = 1"))
            let pinning = ["--interface", "127.0.0.2"]
            _ = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning)
            try larder.child.waitForOutput { $0.contains("client 127.0.0.2 keeps refusing") }

            let seen = try setup.clients(["hello-close", "\(larder.proxyPort)", "x{}.localhost", "\(origin.port)", "127.0.0.3", "100"])
            #expect((seen["flights"] as? [Int])?.allSatisfy { $0 > 0 } == true, "each saw the certificate: \(seen)")
            let deadline = Date().addingTimeInterval(10)
            while try larder.handshakes("closed") < 100, Date() < deadline { usleep(50_000) }
            #expect(try larder.handshakes("closed") == 100)

            let listed = try JSONSerialization.jsonObject(with: try CacheAdmin.admin(larder, "GET", "/tls").body) as? [String: Any]
            let splices = listed?["splices"] as? [[String: Any]] ?? []
            let flood = splices.filter { $0["client"] as? String == "127.0.0.3" }
            #expect(flood.count == 64, "one address's share of the table")
            #expect(flood.contains { $0["host"] as? String == "x99.localhost" }, "its newest pairs stay")
            #expect(splices.contains { $0["client"] as? String == "127.0.0.2" && $0["host"] as? String == "localhost" })
            let blind = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning)
            #expect(blind.exitCode == 0 && blind.status == 200, "127.0.0.2 is still spliced: \(blind.stderr)")
        }

        /// Under systemd's `ListenStream=PORT` (a dual-stack socket) an IPv4 client arrives as
        /// `::ffff:127.0.0.2`: its splice is listed, and ended, under 127.0.0.2 (the address an
        /// operator knows it by), and it is not one group with every other IPv4 client.
        @Test func anIPv4ClientOfADualStackSocketIsSplicedListedAndClearedAsItsIPv4Address() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let activate = Paths.root + "/Tests/LarderIntegrationTests/Fixtures/dual_stack_activate.py"
            let larder = try Larder(
                config: setup.config(ports: [origin.port], extra: "splice_after_failures = 2\n[admin]\ntoken = \"s3cret\""),
                listen: [], launcher: ["/usr/bin/python3", activate])
            #expect(larder.child.stderr.contains("proxy=[::]:"), "the passed dual-stack socket")
            let pinning = ["--interface", "127.0.0.2"]
            for _ in 1...2 { _ = try setup.curl(larder, origin.url("/pinned"), trusting: setup.originCA, pinning) }
            try larder.child.waitForOutput { $0.contains("tunnelling it blind") }
            #expect(larder.child.stderr.contains("client 127.0.0.2 keeps refusing the certificate for localhost"))
            let listed = try JSONSerialization.jsonObject(with: try CacheAdmin.admin(larder, "GET", "/tls").body) as? [String: Any]
            let clients = (listed?["splices"] as? [[String: Any]] ?? []).map { $0["client"] as? String ?? "" }
            #expect(clients == ["127.0.0.2"])

            let other = try setup.curl(larder, origin.url("/shared"))
            #expect(other.exitCode == 0 && other.header("Cache-Status")?.contains("larder") == true, "127.0.0.1 intercepted")
            // Any spelling of the address names it: here the mapped one, percent-encoded.
            let cleared = try CacheAdmin.admin(
                larder, "DELETE", "/tls/splices?host=localhost&client=%3A%3AFFFF%3A127.0.0.2", token: "s3cret")
            #expect(cleared.status == 200 && cleared.text.contains("\"client\":\"127.0.0.2\",\"cleared\":1"), "\(cleared.text)")
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// Upstream retries against a fault-injecting origin.
    @Suite(.timeLimit(.minutes(3))) struct Retries {
        @Test func aKeptAliveConnectionTheOriginDroppedIsRetriedAtOnce() throws {
            let origin = try RawOrigin()
            var script = RawOrigin.Script("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok")
            script.dropsReusedConnection = true
            origin.script("/drop", script)
            // No retries by the policy: only the immediate retry on a fresh connection may save it.
            let larder = try Larder(config: "[retry]\nstrategy = \"none\"\n")
            var failures: [String] = []
            for _ in 0..<20 {
                let result = try Curl.viaProxy(larder.proxy, [origin.url("/drop")], timeout: 5)
                if result.status != 200 || result.text != "ok" { failures.append("\(result.status) \(result.text)") }
            }
            #expect(failures.isEmpty, "\(failures)")
            #expect(origin.reusedConnections.withLock { $0 } > 0, "the origin did drop reused connections")
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("larder_upstream_retries_total"))
            #expect(metricValue(metrics, "larder_upstream_retries_total{reason=\"reset\"}") == 0, "not counted as a policy retry")
        }

        /// curl resends a request whose pooled connection died before any answer on a fresh one
        /// itself, from the URL handle it was given: each request gets its own resource, not the
        /// one the connection carried before.
        @Test func aRequestResentOnAFreshConnectionKeepsItsURL() throws {
            let origin = try RawOrigin()
            let paths = (1...8).map { "/resend\($0)" }
            for path in paths {
                var script = RawOrigin.Script(
                    "HTTP/1.1 200 OK\r\nContent-Length: \(path.utf8.count)\r\nCache-Control: no-store\r\n\r\n\(path)")
                script.dropsReusedConnection = true
                origin.script(path, script)
            }
            let larder = try Larder(config: "[retry]\nstrategy = \"none\"\n")
            for path in paths {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(path)], timeout: 5)
                #expect(result.status == 200 && result.text == path, "\(path): \(result.status) \(result.text)")
            }
            #expect(origin.reusedConnections.withLock { $0 } > 0, "the origin did drop reused connections")
            #expect(paths.map { origin.count($0) } == paths.map { _ in 1 })
        }

        static let quick = """
            [retry]
            base_delay = "200ms"
            multiplier = 2.0
            jitter = "0s"
            retry_on = ["connect", "timeout", "reset", "5xx", "429"]
            """

        @Test func twoFailuresThenSuccessAreHiddenFromTheClient() throws {
            let origin = try Origin()
            try origin.script(
                "/flaky", [Scripted(status: 503), Scripted(status: 503), Scripted(headers: [maxAgeHour], body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/flaky")])
            #expect(result.status == 200)
            #expect(result.text == "ok")
            #expect(try origin.count("/flaky") == 3)
            let times = try origin.requests().filter { $0.target == "/flaky" }.map(\.time)
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
            // Exponential: 200 ms, then 400 ms.
            #expect(gaps.count == 2)
            #expect(gaps[0] >= 0.2 && gaps[1] >= 0.4, "gaps \(gaps)")
            #expect(gaps[1] > gaps[0], "the second delay is the longer one")
            larder.stop()
            #expect(larder.child.stdout.contains("attempts=3 retries=5xx:200ms,5xx:400ms"))
        }

        /// Larder keeps a pooled upstream socket registered with epoll between transfers; the
        /// origin closing it while idle, or curl closing it after `Connection: close`, must
        /// leave nothing stale behind, even as client sockets reuse the descriptor numbers.
        @Test func pooledConnectionsClosedByTheOriginAreReplacedQuietly() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            for round in 0..<4 {
                let idle = try Curl.viaProxy(larder.proxy, [origin.url("/idle\(round)?idle=0.1&size=300&cc=no-store")], timeout: 3)
                #expect(idle.status == 200 && idle.body.count == 300, "round \(round)")
                usleep(400_000)  // the origin hangs up on the pooled connection meanwhile
                let closing = try Curl.viaProxy(
                    larder.proxy, [origin.url("/close\(round)?h=Connection:close&size=200&cc=no-store")], timeout: 3)
                #expect(closing.status == 200 && closing.body.count == 200, "round \(round)")
            }
            #expect(try origin.total() == 8)
            larder.stop()
            let lines = larder.child.stdout.split(separator: "\n").filter { $0.contains("/idle") || $0.contains("/close") }
            #expect(lines.count == 8)
            #expect(lines.allSatisfy { $0.contains("attempts=1") }, "no retries: \(lines)")
        }

        @Test func aResetBeforeTheResponseIsRetried() throws {
            let origin = try Origin()
            try origin.script("/reset", [Scripted(reset: true), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/reset")])
            #expect(result.status == 200)
            #expect(result.text == "ok")
            #expect(try origin.count("/reset") == 2)
        }

        @Test func aResetMidBodyIsNotRetriedAndNothingIsStored() throws {
            let origin = try Origin()
            let body = String(repeating: "x", count: 100_000)
            try origin.script(
                "/midbody", [Scripted(headers: [maxAgeHour], body: body, truncate: 1000), Scripted(headers: [maxAgeHour], body: body)],
                conditional: false)
            let larder = try Larder(config: Self.quick)
            let first = try Curl.viaProxy(larder.proxy, [origin.url("/midbody")])
            #expect(first.exitCode == 18, "curl sees a partial transfer")
            #expect(try origin.count("/midbody") == 1, "no retry once the head was sent")
            let second = try Curl.viaProxy(larder.proxy, [origin.url("/midbody")])
            #expect(second.body.count == 100_000)
            #expect(try origin.count("/midbody") == 2, "the truncated response was not stored")
        }

        @Test func postIsNotRetried() throws {
            let origin = try Origin()
            try origin.script("/post", [Scripted(status: 503), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            let result = try Curl.viaProxy(larder.proxy, ["--data-binary", "x", origin.url("/post")])
            #expect(result.status == 503)
            #expect(try origin.count("/post") == 1)
        }

        @Test func postOnAnIdempotentRouteIsRetried() throws {
            let origin = try Origin()
            try origin.script("/safe-post", [Scripted(status: 503), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(
                config: Self.quick + "\n[[route]]\nmatch = \"http://127.0.0.1:*/safe-post\"\nidempotent = true\ndedup = \"always\"\n")
            let result = try Curl.viaProxy(larder.proxy, ["--data-binary", "x", origin.url("/safe-post")])
            #expect(result.status == 200)
            #expect(try origin.count("/safe-post") == 2)
        }

        @Test func fourHundredFourIsNotRetried() throws {
            let origin = try Origin()
            try origin.script("/missing", [Scripted(status: 404), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/missing")]).status == 404)
            #expect(try origin.count("/missing") == 1)
        }

        @Test func retryAfterOn429IsHonoured() throws {
            let origin = try Origin()
            try origin.script(
                "/slowdown", [Scripted(status: 429, headers: [("Retry-After", "1")]), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/slowdown")])
            #expect(result.status == 200)
            let times = try origin.requests().filter { $0.target == "/slowdown" }.map(\.time)
            #expect(times.count == 2)
            #expect(times[1] - times[0] >= 1.0, "waited for Retry-After")
        }

        @Test func retryAfterBeyondMaxDelayMakesTheFailureFinal() throws {
            let origin = try Origin()
            try origin.script(
                "/later", [Scripted(status: 503, headers: [("Retry-After", "3600")]), Scripted(body: "ok")], conditional: false)
            let larder = try Larder(config: Self.quick)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/later")]).status == 503)
            #expect(try origin.count("/later") == 1)
        }

        @Test func coalescedWaitersShareTheRetries() throws {
            let origin = try Origin()
            try origin.script(
                "/shared",
                [Scripted(status: 503, delay: 0.3), Scripted(status: 503), Scripted(headers: [maxAgeHour], body: "ok")],
                conditional: false)
            let larder = try Larder(config: Self.quick)
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var arguments = [
                "-s", "--max-time", "30", "--parallel", "--parallel-max", "50", "--parallel-immediate", "--proxy", larder.proxy,
            ]
            for index in 0..<50 { arguments += ["-o", "\(directory)/\(index)", origin.url("/shared")] }
            let clients = try ChildProcess("/usr/bin/curl", arguments)
            clients.process.waitUntilExit()
            for index in 0..<50 {
                #expect(FileManager.default.contents(atPath: "\(directory)/\(index)") == Data("ok".utf8), "client \(index)")
            }
            #expect(try origin.count("/shared") == 3, "retried once for all 50 waiters")
        }

        @Test func aDownOriginUnderLoadStaysWithinTheRetryBudget() throws {
            let origin = try Origin()
            try origin.script("/down", [Scripted(status: 503)], conditional: false)
            let larder = try Larder(
                config: """
                    [retry]
                    base_delay = "5ms"
                    jitter = "0s"
                    max_attempts = 3
                    budget_ratio = 0.2
                    budget_min = 5
                    """)
            for _ in 0..<40 {
                #expect(try Curl.viaProxy(larder.proxy, [origin.url("/down")]).status == 503)
            }
            let count = try origin.count("/down")
            // Unbudgeted it would be 40 × 4 = 160; the budget allows max(5, 20% of 40) retries.
            #expect(count >= 40 && count <= 40 + 8 + 1, "\(count) origin requests")
            try larder.child.waitForOutput { $0.contains("retry budget exhausted") }
        }

        @Test func finalFailureNamesTheCauseAndTheAttempts() throws {
            let larder = try Larder(config: Self.quick.replacingOccurrences(of: "200ms", with: "10ms"))
            let port = try IntegrationTests.ProxyPath.unusedPort()
            let result = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(port)/gone"])
            #expect(result.status == 502)
            let status = try #require(result.cacheStatus)
            #expect(status.detail?.contains("connect:") == true)
            #expect(status.detail?.contains("attempts=4 retries=connect:10ms,connect:20ms,connect:40ms") == true, "\(status.raw)")
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// Pooled upstream connections: a byte that arrives on one while no request is outstanding
    /// answers no request (RFC 9112 §9.3), and keep-alive reuse goes on for origins that behave.
    /// One worker: every request shares the one loop's connection pool.
    @Suite(.timeLimit(.minutes(3))) struct IdleUpstreamConnections {
        static let config = "[proxy]\nworkers = 1\n"

        static func response(_ body: String, _ cacheControl: String = "max-age=600") -> String {
            "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nCache-Control: \(cacheControl)\r\n\r\n\(body)"
        }

        static func keptAlive(_ text: String, late: (TimeInterval, String)? = nil) -> RawOrigin.Script {
            var script = RawOrigin.Script(text)
            script.keepsConnection = true
            script.late = late.map { ($0.0, Array($0.1.utf8)) }
            return script
        }

        static func idleClosed(_ larder: Larder, _ reason: String) throws -> Double {
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            return metricValue(metrics, "larder_upstream_idle_closed_total{reason=\"\(reason)\"}")
        }

        @Test func aLateSecondResponseAnswersNoOtherURLAndIsStoredNowhere() throws {
            let origin = try RawOrigin()
            origin.script("/first", Self.keptAlive(Self.response("first"), late: (0.3, Self.response("late"))))
            origin.script("/second", Self.keptAlive(Self.response("second")))
            let larder = try Larder(config: Self.config)
            let first = try Curl.viaProxy(larder.proxy, [origin.url("/first")])
            #expect(first.status == 200 && first.text == "first")
            // The late response arrives 300 ms after the first, on the idle pooled connection.
            Thread.sleep(forTimeInterval: 0.8)
            let second = try Curl.viaProxy(larder.proxy, [origin.url("/second")])
            #expect(second.status == 200 && second.text == "second", "the late response answered another URL: \(second.text)")
            let hit = try Curl.viaProxy(larder.proxy, [origin.url("/second")])
            #expect(hit.text == "second" && hit.header("cache-status")?.hasPrefix("larder; hit") == true, "\(hit.text) \(hit.headers)")
            #expect(origin.count("/second") == 1)
            #expect(origin.connections.withLock { $0 } == 2, "the connection that carried the late response was not reused")
            #expect(try Self.idleClosed(larder, "data") == 1)
            #expect(larder.child.stderr.contains("bytes arrived that no request asked for"), "logged with its origin")
        }

        /// The second response in the same write as the first: curl reads it with the first
        /// response's bytes, past its end, and the connection is not kept.
        @Test func aSecondResponseRightBehindTheFirstAnswersNoOtherURL() throws {
            let origin = try RawOrigin()
            origin.script("/first", Self.keptAlive(Self.response("first") + Self.response("late")))
            origin.script("/second", Self.keptAlive(Self.response("second")))
            let larder = try Larder(config: Self.config)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/first")]).text == "first")
            Thread.sleep(forTimeInterval: 0.2)
            let second = try Curl.viaProxy(larder.proxy, [origin.url("/second")])
            #expect(second.status == 200 && second.text == "second", "\(second.text)")
            #expect(origin.connections.withLock { $0 } == 2)
        }

        @Test func aLate408ReachesNoClientThreeTimesInThree() throws {
            let origin = try RawOrigin()
            let timeout = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 7\r\nConnection: close\r\n\r\ntimeout"
            let larder = try Larder(config: Self.config)
            var wrong: [String] = []
            for round in 1...3 {
                var first = RawOrigin.Script(Self.response("a\(round)", "no-store"))
                // The origin's idle timeout: a 408 on the kept connection, then its close.
                first.late = (0.3, Array(timeout.utf8))
                origin.script("/a\(round)", first)
                origin.script("/b\(round)", Self.keptAlive(Self.response("b\(round)", "no-store")))
                let answer = try Curl.viaProxy(larder.proxy, [origin.url("/a\(round)")])
                #expect(answer.status == 200 && answer.text == "a\(round)")
                Thread.sleep(forTimeInterval: 0.8)
                let other = try Curl.viaProxy(larder.proxy, [origin.url("/b\(round)")])
                if other.status != 200 || other.text != "b\(round)" { wrong.append("round \(round): \(other.status) \(other.text)") }
            }
            #expect(wrong.isEmpty, "the late 408 answered the next client: \(wrong)")
            #expect(try Self.idleClosed(larder, "data") == 3)
        }

        @Test func aWellBehavedKeepAliveOriginKeepsOneConnection() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: Self.config)
            for index in 1...5 {
                origin.script("/ka\(index)", Self.keptAlive(Self.response("ka\(index)")))
                let result = try Curl.viaProxy(larder.proxy, [origin.url("/ka\(index)")])
                #expect(result.status == 200 && result.text == "ka\(index)")
                Thread.sleep(forTimeInterval: 0.2)
            }
            #expect(origin.connections.withLock { $0 } == 1, "five misses on one pooled connection")
            #expect(try Self.idleClosed(larder, "data") == 0 && (try Self.idleClosed(larder, "closed")) == 0)
        }

        /// A slow client pauses its upstream transfer, and curl stops watching the socket while
        /// the origin keeps sending: that connection is in use, not idle, and is left alone.
        @Test func aPausedTransferIsNotMistakenForAnIdleConnection() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let size = 24 * 1024 * 1024
            let child = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-s", "-S", "--max-time", "60", "--limit-rate", "8M", "--proxy", larder.proxy, "-o", "/dev/null", "-w",
                    "%{size_download}", origin.url("/paused?size=\(size)&cc=no-store"),
                ])
            child.process.waitUntilExit()
            #expect(child.process.terminationStatus == 0, "curl: \(child.stderr)")
            #expect(child.stdout == "\(size)")
            #expect(try Self.idleClosed(larder, "data") == 0 && (try Self.idleClosed(larder, "closed")) == 0)
        }

        /// The same over TLS: curl's liveness check of a TLS connection peeks at the socket too.
        @Test func aLateResponseOverTLSAnswersNoOtherURL() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "workers = 1"))
            let first = try setup.curl(larder, origin.url("/tls-first?late=0.3&cc=no-store"))
            #expect(first.status == 200, "\(first.stderr)")
            Thread.sleep(forTimeInterval: 0.8)
            let path = "/tls-second?cc=max-age=600"
            let second = try setup.curl(larder, origin.url(path))
            #expect(second.status == 200 && second.text != "late", "the late response answered another URL")
            #expect(second.body == (try origin.directBody(path)), "the origin's own answer for that URL")
            #expect(try Self.idleClosed(larder, "data") == 1)
        }

        /// A response sent right behind a large one, in the record that carries the end of its
        /// body: curl reads a body only up to its end, so the rest of that record waits in
        /// OpenSSL's buffer, off the socket, where no readiness shows it and libcurl's liveness
        /// check does not look.
        @Test func aResponseInTheSameTLSRecordAsTheLastBodyBytesAnswersNoOtherURL() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "workers = 1"))
            let first = try setup.curl(larder, origin.url("/tls-large?size=40000&behind=1&cc=no-store"))
            #expect(first.status == 200 && first.body.count == 40000, "\(first.stderr)")
            let path = "/tls-next?cc=max-age=600"
            let second = try setup.curl(larder, origin.url(path))
            #expect(second.status == 200 && second.text != "late", "the response behind the first answered another URL")
            #expect(second.body == (try origin.directBody(path)), "the origin's own answer for that URL")
            #expect(try Self.idleClosed(larder, "data") == 1)
        }

        /// The same, with a request for that origin queued behind the per-host limit: curl
        /// hands it the connection inside the call that ends the first transfer, before the
        /// loop or that transfer's end can look.
        @Test func aResponseInTheSameTLSRecordAnswersNoRequestQueuedForTheConnection() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let queue = "[upstream]\nmax_connections_per_host = 1\n"
            let larder = try Larder(config: setup.config(ports: [origin.port], extra: queue, proxy: "workers = 1"))
            let first = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-s", "-S", "--max-time", "20", "--proxy", larder.proxy, "--cacert", setup.larderCA, "-o", "/dev/null", "-w",
                    "%{http_code} %{size_download}", origin.url("/tls-held?delay=0.6&size=40000&behind=1&cc=no-store"),
                ])
            // The second request arrives while the first holds the one connection.
            Thread.sleep(forTimeInterval: 0.3)
            let path = "/tls-queued?cc=max-age=600"
            let second = try setup.curl(larder, origin.url(path))
            first.process.waitUntilExit()
            #expect(first.stdout == "200 40000", "\(first.stderr)")
            #expect(second.status == 200 && second.text != "late", "the response behind the first answered the queued request")
            #expect(second.body == (try origin.directBody(path)), "the origin's own answer for that URL")
            #expect(try Self.idleClosed(larder, "data") == 1)
        }

        /// A TLS 1.3 origin sends session tickets after its handshake: they must not count as
        /// bytes on an idle connection, or no HTTPS connection would ever be reused.
        @Test func anHTTPSOriginKeepsOneConnectionAcrossClients() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "workers = 1"))
            for index in 1...5 {
                let result = try setup.curl(larder, origin.url("/tls\(index)?cc=no-store"))
                #expect(result.status == 200, "\(result.stderr)")
                Thread.sleep(forTimeInterval: 0.3)
            }
            #expect(try origin.connections() == 1, "five misses, five clients, one upstream connection")
            #expect(try Self.idleClosed(larder, "data") == 0)
        }

        /// libcurl 7.88 closes a socket whose connect timed out itself, not through the close
        /// callback: the next upstream socket, which the kernel gives the same number, must still
        /// be watched, or a miss to a healthy origin waits out its own connect timeout (4 s
        /// here) before curl looks at it. One client's unreachable origin slowed everyone's.
        @Test func aConnectTimeoutLeavesTheNextConnectionWatched() throws {
            let hole = try TunnelTarget(.blackhole)
            let origin = try RawOrigin()
            let larder = try Larder(config: Self.config + "[upstream]\nconnect_timeout = \"4s\"\n[retry]\nstrategy = \"none\"\n")
            var stalled: [String] = []
            for round in 1...3 {
                let timedOut = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(hole.port)/hole\(round)"], timeout: 20)
                #expect(timedOut.status == 504, "round \(round): \(timedOut.status) \(timedOut.stderr)")
                for index in 1...3 {
                    let path = "/ok\(round)-\(index)"
                    origin.script(path, Self.keptAlive(Self.response(path, "no-store")))
                    // Half the connect timeout: only a socket epoll never reports waits that long.
                    let answer = try Curl.viaProxy(larder.proxy, [origin.url(path)], timeout: 2)
                    if answer.status != 200 || answer.text != path {
                        stalled.append("\(path): exit \(answer.exitCode), \(answer.status)")
                    }
                }
            }
            #expect(stalled.isEmpty, "misses after a connect timeout waited for it: \(stalled)")
        }
    }
}

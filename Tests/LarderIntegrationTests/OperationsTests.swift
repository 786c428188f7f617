import Foundation
import Glibc
import LarderServer
import Testing

extension IntegrationTests {
    /// Everything an operator touches: systemd, the admin listener, metrics, dashboard, CLI, logs.
    @Suite(.timeLimit(.minutes(3))) struct Operations {
        // MARK: systemd

        @Test func unitFilesPassSystemdAnalyzeVerify() throws {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
                print("skipped: systemd-analyze is not installed")
                return
            }
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // ExecStart must name an existing binary for verify: point it at the one just built.
            let service = try String(contentsOfFile: Paths.root + "/systemd/larder.service", encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/larder", with: Paths.larder)
            try service.write(toFile: directory + "/larder.service", atomically: true, encoding: .utf8)
            for unit in ["larder.socket", "larder-admin.socket"] {
                try FileManager.default.copyItem(atPath: Paths.root + "/systemd/" + unit, toPath: directory + "/" + unit)
            }
            let verify = try ChildProcess(
                "/usr/bin/systemd-analyze",
                ["verify", directory + "/larder.service", directory + "/larder.socket", directory + "/larder-admin.socket"])
            verify.process.waitUntilExit()
            #expect(verify.process.terminationStatus == 0, "systemd-analyze verify: \(verify.stderr)")
            #expect(!verify.stderr.contains("larder"), "warnings: \(verify.stderr)")
        }

        @Test func notifiesReadyReloadingAndStoppingInOrder() throws {
            let notify = try NotifySocket()
            let larder = try Larder(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"])
            var messages = notify.receive(for: 5) { $0 == "READY=1" }
            #expect(messages.contains("READY=1"))
            #expect(messages.contains { $0.hasPrefix("STATUS=") })
            // The watchdog is pinged at half the interval.
            messages = notify.receive(for: 1) { $0 == "WATCHDOG=1" }
            #expect(messages.contains("WATCHDOG=1"))
            try larder.rewriteConfig("[upstream]\ntimeout = \"30s\"\n")
            larder.child.signal(SIGHUP)
            messages = notify.receive(for: 5) { $0 == "READY=1" }
            let reloading = messages.firstIndex(of: "RELOADING=1")
            let ready = messages.lastIndex(of: "READY=1")
            #expect(reloading != nil && ready != nil && reloading! < ready!, "\(messages)")
            #expect(messages.contains { $0.hasPrefix("MONOTONIC_USEC=") })
            larder.child.signal(SIGTERM)
            messages = notify.receive(for: 5) { $0 == "STOPPING=1" }
            #expect(messages.contains("STOPPING=1"))
            #expect(larder.stop() == 0)
        }

        @Test func runsOnSocketsPassedBySystemd() throws {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
                print("skipped: systemd-socket-activate is not installed")
                return
            }
            let origin = try Origin()
            let proxyPort = try IntegrationTests.ProxyPath.unusedPort()
            let adminPort = try IntegrationTests.ProxyPath.unusedPort()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let activated = try ChildProcess(
                "/usr/bin/systemd-socket-activate",
                [
                    "-l", "127.0.0.1:\(proxyPort)", "-l", "127.0.0.1:\(adminPort)", "--fdname=proxy:admin",
                    Paths.larder, "serve", "--cache-dir", cache,
                ])
            defer { activated.stop() }
            try activated.waitForOutput { $0.contains("Listening on 127.0.0.1:\(adminPort)") }
            // The sockets listen before larder runs: the first connection starts it.
            let first = try Curl.viaProxy("http://127.0.0.1:\(proxyPort)", [origin.url("/activated?cc=max-age=60")])
            #expect(first.status == 200)
            let second = try Curl.viaProxy("http://127.0.0.1:\(proxyPort)", [origin.url("/activated?cc=max-age=60")])
            #expect(second.cacheStatus?.hit == true)
            #expect(try Curl.run(["http://127.0.0.1:\(adminPort)/healthz"]).text == "ok\n")
            try activated.waitForOutput { $0.contains("sockets=from systemd") }
        }

        @Test func signalsOtherDaemonsUseDoNotStopLarder() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/signals?cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            // USR1 (logrotate's reopen), USR2, ALRM and a real-time signal: none is fatal.
            for signal in [SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGIO, SIGPWR, 40] {
                larder.child.signal(signal)
                Thread.sleep(forTimeInterval: 0.05)
                #expect(larder.child.isRunning, "signal \(signal) ended the daemon")
            }
            _ = try larder.child.waitForOutput { $0.contains("SIGUSR2 ignored") }
            #expect(larder.child.stderr.contains("SIGUSR1: access lines go to stdout; nothing to reopen"))
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == true, "still serving, cache intact")
            #expect(larder.stop() == 0)
        }

        @Test func sigtermLetsInFlightRequestsFinish() throws {
            let origin = try Origin()
            let larder = try Larder()
            let client = try ChildProcess(
                "/usr/bin/curl", ["-s", "--proxy", larder.proxy, "-o", "/dev/null", "-w", "%{http_code}", origin.url("/draining?delay=1")])
            usleep(300_000)
            larder.child.signal(SIGTERM)
            client.process.waitUntilExit()
            #expect(client.stdout == "200")
            #expect(larder.stop() == 0)
            #expect(larder.child.stderr.contains("draining"))
        }

        // MARK: Admin listener

        /// The daemon is linked with mimalloc (Package.swift, docs/PERFORMANCE.md "Design choices"): a
        /// linker that dropped the unreferenced library would silently bring back glibc's malloc.
        @Test func daemonRunsOnMimalloc() throws {
            let larder = try Larder()
            // Read to the end: procfs reports size 0, and a read sized by it stops at one page.
            let file = try #require(FileHandle(forReadingAtPath: "/proc/\(larder.child.pid)/maps"))
            let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
            try file.close()
            #expect(maps.contains("/libmimalloc"), "\(maps.utf8.count) bytes of maps")
        }

        @Test func statsCountRequestsHitsAndBytesPerHost() throws {
            let origin = try Origin()
            let larder = try Larder()
            for _ in 0..<3 { _ = try Curl.viaProxy(larder.proxy, [origin.url("/counted?cc=max-age=60&size=1000")]) }
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/other?cc=no-store&size=10")])
            let hosts = try larder.stats().topHosts
            let entry = try #require(hosts.first { $0.host == "127.0.0.1:\(origin.port)" })
            #expect(entry.requests == 4)
            #expect(entry.hits == 2)
            #expect(entry.bytes == 3010)
        }

        /// `proxy.busy_poll`: a loop that keeps polling takes a keep-alive client's next
        /// request without having slept, and sleeps once the polling time has passed; with
        /// "0" it never polls; a reload turns it on.
        @Test func busyPollingCatchesTheNextRequestAndThenSleeps() throws {
            let origin = try Origin()
            let urls = (0..<4).map { origin.url("/busy-\($0)?cc=max-age=60&size=100") }
            /// Four requests on one curl connection (each follows the previous response at
            /// once), then the loop's polls as /stats and /metrics count them.
            func pollsAfterTraffic(_ larder: Larder) throws -> (caught: Int, expired: Int, metric: Int) {
                #expect(try Curl.viaProxy(larder.proxy, urls).status == 200)
                usleep(50_000)  // well past the polling time: the loop has gone to sleep
                let busy = try larder.stats().busyPoll
                let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
                let line = try #require(
                    metrics.split(separator: "\n").first { $0.hasPrefix("larder_busy_polls_total{outcome=\"caught\"} ") })
                let metric = try #require(Int(line.split(separator: " ").last ?? ""))
                return (busy.caught, busy.expired, metric)
            }
            let polling = try Larder(config: "[proxy]\nbusy_poll = \"10ms\"\n")
            let on = try pollsAfterTraffic(polling)
            #expect(on.caught >= 1 && on.expired >= 1, "\(on)")
            #expect(on.metric >= on.caught, "the metric counts what /stats did, and maybe the /stats request")

            let sleeping = try Larder(config: "[proxy]\nbusy_poll = \"0\"\n")
            let off = try pollsAfterTraffic(sleeping)
            #expect(off.caught == 0 && off.expired == 0 && off.metric == 0, "\(off)")
            let defaults = try pollsAfterTraffic(try Larder())
            #expect(defaults.caught == 0 && defaults.expired == 0, "busy polling is off by default: \(defaults)")
            try sleeping.reload("[proxy]\nbusy_poll = \"10ms\"\n")
            let reloaded = try pollsAfterTraffic(sleeping)
            #expect(reloaded.caught >= 1, "after the reload: \(reloaded)")
        }

        /// `proxy.workers = "auto"` (the default): one event loop per CPU the process may run
        /// on; a number sets it.
        @Test func workersFollowTheCPUsTheProcessMayRunOn() throws {
            func workers(_ larder: Larder) -> String? {
                larder.child.stderr.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("workers=") }.map { String($0.dropFirst(8)) }
            }
            #expect(workers(try Larder(launcher: ["/usr/bin/taskset", "-c", "0"])) == "1")
            if sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2 {
                #expect(workers(try Larder(launcher: ["/usr/bin/taskset", "-c", "0,1"])) == "2")
                #expect(workers(try Larder(config: "[proxy]\nworkers = \"auto\"\n", launcher: ["/usr/bin/taskset", "-c", "0,1"])) == "2")
            }
            #expect(workers(try Larder(config: "[proxy]\nworkers = 3\n", launcher: ["/usr/bin/taskset", "-c", "0"])) == "3")
        }

        /// `larder stats` reads the admin answer with the daemon's strict parsers: ambiguous
        /// framing, a chunked body cut short or a document of another shape is an error that
        /// says so, never a half-read table.
        @Test func cliStatsRefusesMalformedAnswers() throws {
            let fake = try RawOrigin()
            let larder = try Larder()
            let document = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/stats"]).text
            func stats(_ script: RawOrigin.Script) throws -> (status: Int32, output: String) {
                fake.script("/stats", script)
                let child = try ChildProcess(Paths.larder, ["stats", "--admin", "127.0.0.1:\(fake.port)"])
                child.process.waitUntilExit()
                return (child.process.terminationStatus, child.stdout + child.stderr)
            }
            let good = try stats(.init("HTTP/1.1 200 OK\r\nContent-Length: \(document.utf8.count)\r\n\r\n" + document))
            #expect(good.status == 0 && good.output.contains("hit ratio"), "\(good.output)")
            let both = try stats(.init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"))
            #expect(both.status != 0 && both.output.contains("malformed response"), "\(both.output)")
            let cut = try stats(.init("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"version\""))
            #expect(cut.status != 0 && cut.output.contains("chunked body"), "\(cut.output)")
            let shape = try stats(.init("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"version\":1}"))
            #expect(shape.status != 0 && shape.output.contains("--json"), "\(shape.output)")
        }

        @Test func adminEndpointsAnswer() throws {
            let origin = try Origin()
            let larder = try Larder()
            let admin = "http://127.0.0.1:\(larder.adminPort)"
            #expect(try Curl.run([admin + "/healthz"]).text == "ok\n")
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/s?cc=max-age=60")])
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/s?cc=max-age=60")])
            let stats = try StatsDocument.decode(Array(try Curl.run([admin + "/stats"]).body))
            #expect(stats.requests["hit"] == 1)
            #expect(stats.requests["miss"] == 1)
            #expect(stats.hitRatio == 0.5)
            #expect(try Curl.run([admin + "/nope"]).status == 404)
            #expect(try Curl.run(["-X", "PUT", admin + "/stats"]).status == 405)
            let dashboard = try Curl.run([admin + "/"])
            #expect(dashboard.header("content-type")?.hasPrefix("text/html") == true)
            #expect(!dashboard.text.contains("http://") && !dashboard.text.contains("https://"), "no external assets")
        }

        @Test func purgeAndClearNeedTheTokenWhenOneIsSet() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[admin]\ntoken = \"s3cret\"\n")
            let admin = "http://127.0.0.1:\(larder.adminPort)"
            let url = origin.url("/purge-me?cc=max-age=60")
            _ = try Curl.viaProxy(larder.proxy, [url])
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == true)
            let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let refused = try Curl.run(["-X", "POST", admin + "/purge?url=" + encoded])
            #expect(refused.status == 401)
            #expect(refused.header("www-authenticate")?.hasPrefix("Bearer") == true)
            let wrong = try Curl.run(["-X", "POST", "-H", "Authorization: Bearer nope", admin + "/purge?url=" + encoded])
            #expect(wrong.status == 401)
            let purged = try Curl.run(["-X", "POST", "-H", "Authorization: Bearer s3cret", admin + "/purge?url=" + encoded])
            #expect(purged.status == 200)
            #expect(purged.text.contains("\"purged\":true"))
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == false)
            #expect(try Curl.run(["-X", "DELETE", admin + "/cache"]).status == 401)
            #expect(try Curl.run(["-X", "DELETE", "-H", "Authorization: Bearer s3cret", admin + "/cache"]).status == 200)
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == false)
            #expect(try origin.count("/purge-me?cc=max-age=60") == 3)
            // Reads need no token.
            #expect(try Curl.run([admin + "/stats"]).status == 200)
        }

        @Test func adminAndProxyAddressesAreNotReachableThroughTheProxy() throws {
            let larder = try Larder()
            for target in [
                "http://127.0.0.1:\(larder.adminPort)/stats", "http://localhost:\(larder.adminPort)/cache",
                "http://127.0.0.1:\(larder.proxyPort)/x",
            ] {
                let result = try Curl.viaProxy(larder.proxy, [target])
                #expect(result.status == 403, "\(target)")
            }
            #expect(try Curl.viaProxy(larder.proxy, ["-X", "DELETE", "http://127.0.0.1:\(larder.adminPort)/cache"]).status == 403)
        }

        @Test func metricsPassPromtoolAndMove() throws {
            let origin = try Origin()
            let larder = try Larder()
            let admin = "http://127.0.0.1:\(larder.adminPort)/metrics"
            func value(_ text: String, _ series: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
            }
            let before = try Curl.run([admin]).text
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/m?cc=max-age=60&size=1000")])
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/m?cc=max-age=60&size=1000")])
            let after = try Curl.run([admin]).text
            #expect(
                (value(after, "larder_requests_total{outcome=\"hit\"}") ?? 0)
                    == (value(before, "larder_requests_total{outcome=\"hit\"}") ?? 0) + 1)
            #expect((value(after, "larder_upstream_requests_total") ?? 0) == 1)
            #expect((value(after, "larder_bytes_served_total{source=\"cache\"}") ?? 0) == 1000)
            #expect((value(after, "larder_cache_entries{tier=\"memory\"}") ?? 0) == 1)
            #expect(after.contains("larder_request_duration_seconds_bucket"))
            #expect(after.contains("larder_build_info{version="))
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") else {
                print("skipped promtool check: promtool is not installed")
                return
            }
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try after.write(toFile: directory + "/metrics.txt", atomically: true, encoding: .utf8)
            let check = try ChildProcess("/bin/sh", ["-c", "/usr/bin/promtool check metrics < \(directory)/metrics.txt"])
            check.process.waitUntilExit()
            #expect(check.process.terminationStatus == 0, "promtool: \(check.stdout)\(check.stderr)")
        }

        /// `larder_upstream_errors_total` (/stats `upstream.errors`) counts the exchanges that got
        /// no usable answer (here a refused connection), not the origin's error statuses, which
        /// `larder_upstream_failures_total{reason="5xx"}` counts.
        @Test func upstreamErrorsAreExportedApartFromErrorStatuses() throws {
            let origin = try Origin()
            let dead = try freePort()
            let larder = try Larder(config: "[retry]\nstrategy = \"none\"\n")
            #expect(try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(dead)/refused"]).status == 502)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/broken?status=503")]).status == 503)
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("\nlarder_upstream_errors_total 1\n"), "\(metrics)")
            #expect(metrics.contains("\nlarder_upstream_failures_total{reason=\"connect\"} 1\n"))
            #expect(metrics.contains("\nlarder_upstream_failures_total{reason=\"5xx\"} 1\n"))
            #expect(try larder.stats().upstream.errors == 1)
        }

        /// The dashboard's DOM after headless Chromium ran it for three (virtual) seconds, and a
        /// screenshot's PNG bytes; nil where no Chromium is installed.
        static func renderDashboard(_ larder: Larder) throws -> (dom: String, screenshot: Data)? {
            guard
                let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(where: {
                    FileManager.default.isExecutableFile(atPath: $0)
                })
            else {
                print("skipped: no headless Chromium installed")
                return nil
            }
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let page = "http://127.0.0.1:\(larder.adminPort)/"
            let flags = [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=\(directory)/profile",
                "--virtual-time-budget=3000",
            ]
            let dump = try ChildProcess(chromium, flags + ["--dump-dom", page])
            dump.process.waitUntilExit()
            let shot = try ChildProcess(chromium, flags + ["--window-size=1280,900", "--screenshot=\(directory)/dashboard.png", page])
            shot.process.waitUntilExit()
            return (dump.stdout, try Data(contentsOf: URL(fileURLWithPath: directory + "/dashboard.png")))
        }

        /// The number an element of the dashboard carries in its `data-value`.
        static func shown(_ id: String, in dom: String) -> Double? {
            guard let range = dom.range(of: "id=\"\(id)\" data-value=\"") else { return nil }
            return Double(dom[range.upperBound...].prefix { $0 != "\"" })
        }

        @Test func dashboardShowsTheSameNumbersAsStats() throws {
            let origin = try Origin()
            let larder = try Larder()
            for path in ["/d1?cc=max-age=60&size=3000", "/d1?cc=max-age=60&size=3000", "/d2?cc=no-store&size=500", "/d3?status=404"] {
                _ = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            }
            guard let (dom, screenshot) = try Self.renderDashboard(larder) else { return }
            #expect(screenshot.count > 10_000, "a rendered screenshot")
            #expect(screenshot.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
            let stats = try larder.stats()
            func shown(_ id: String) -> Double? { Self.shown(id, in: dom) }
            let requests = stats.requests
            let responses = stats.responses ?? [:]
            #expect(shown("hit-ratio") == stats.hitRatio)
            #expect(shown("bytes-cache") == Double(stats.bytes.fromCache))
            #expect(shown("bytes-upstream") == Double(stats.bytes.fromUpstream))
            #expect(shown("memory-entries") == Double(stats.memory.entries))
            #expect(shown("coalesced") == Double(stats.coalescing.coalesced))
            #expect(dom.contains("data-host=\"127.0.0.1:\(origin.port)\""), "top hosts lists the origin")
            // Its own polls are admin requests: neither counted nor a rate while the proxy idles.
            #expect(shown("requests-total") == 4, "the four proxied requests, not the page's polls")
            #expect((requests["admin"] ?? 0) >= 2, "the page did poll")
            #expect(shown("request-rate") == 0, "idle proxy, idle rate")
            #expect(responses["2xx"] == 3 && responses["4xx"] == 1, "\(responses)")
            #expect(shown("status-2xx") == 3 && shown("status-4xx") == 1 && shown("status-5xx") == 0)
            #expect(dom.contains("id=\"time-axis\"") && dom.contains(">now</span>"), "a time axis under the chart")
            #expect(dom.range(of: #"id="uptime" data-value="[0-9.]+">up [0-9]+ s<"#, options: .regularExpression) != nil, "uptime in words")
            #expect(dom.contains("id=\"badges\"></span>"), "no badge while all is well")
        }

        @Test func dashboardBadgesAMissingDiskTierAndADownParent() throws {
            let dead = try freePort()
            let blocker = Paths.temporaryDirectory() + "/file"
            try FileManager.default.createDirectory(
                atPath: (blocker as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try "not a folder".write(toFile: blocker, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: (blocker as NSString).deletingLastPathComponent) }
            let larder = try Larder(
                config: "[upstream]\nparent = \"http://127.0.0.1:\(dead)\"\n[retry]\nstrategy = \"none\"\n",
                cacheDirectory: blocker + "/cache")
            #expect(try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:9/x"]).status == 502)
            guard let (dom, _) = try Self.renderDashboard(larder) else { return }
            #expect(dom.contains("<span class=\"badge\">no disk tier</span>"), "\(dom.prefix(2000))")
            #expect(dom.contains("<span class=\"badge\">parent http://127.0.0.1:\(dead) down</span>"))
            #expect(try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"]).status == 503)
        }

        // MARK: CLI and logs

        /// `warm --proxy` takes the proxy as `larder client --proxy` and `http_proxy` give it.
        @Test func warmTakesTheProxyAsAURLToo() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/w-url?cc=max-age=60&size=100")
            let warm = try ChildProcess(Paths.larder, ["warm", "--proxy", "http://127.0.0.1:\(larder.proxyPort)/", url])
            warm.process.waitUntilExit()
            #expect(warm.process.terminationStatus == 0, "\(warm.stderr)")
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == true)
            let bad = try ChildProcess(Paths.larder, ["warm", "--proxy", "http://proxy.example:3128", url])
            bad.process.waitUntilExit()
            #expect(bad.process.terminationStatus == 64 && bad.stderr.contains("is not an address like"), "\(bad.stderr)")
        }

        @Test func cliStatsPurgeAndWarm() throws {
            let origin = try Origin()
            let larder = try Larder()
            let admin = "127.0.0.1:\(larder.adminPort)"
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let urls = [origin.url("/w1?cc=max-age=60&size=2000"), origin.url("/w2?cc=no-store"), "http://127.0.0.1:1/nothing"]
            // A bad line in the middle is named by number and skipped; the rest is still fetched.
            let list = [urls[0], "ftp://not-http/x", urls[1], urls[2], origin.url("/w404?status=404")]
            try (list.joined(separator: "\n") + "\n# a comment\n").write(toFile: directory + "/urls.txt", atomically: true, encoding: .utf8)
            let warm = try ChildProcess(
                Paths.larder, ["warm", "--proxy", "127.0.0.1:\(larder.proxyPort)", "--file", directory + "/urls.txt"])
            warm.process.waitUntilExit()
            #expect(warm.process.terminationStatus == 1, "failures")
            #expect(
                warm.stdout.contains("5 URLs: 2 fetched (1 stored, 1 not cacheable; "), "\(warm.stdout)")
            #expect(warm.stdout.contains("), 0 already cached (0 B), 3 failed (1 bad list line)"), "\(warm.stdout)")
            #expect(warm.stderr.contains("urls.txt:2: 'ftp://not-http/x' is not an absolute http(s) URL; skipped"), "\(warm.stderr)")
            #expect(warm.stderr.contains("/w404?status=404: FAILED (HTTP 404)"), "each failure's reason: \(warm.stderr)")
            #expect(
                warm.stderr.contains("/nothing: FAILED (HTTP 502: \"connect:")
                    || warm.stderr.contains("/nothing: FAILED (HTTP 502: connect:"), "\(warm.stderr)")
            #expect(try Curl.viaProxy(larder.proxy, [urls[0]]).cacheStatus?.hit == true)
            let stats = try ChildProcess(Paths.larder, ["stats", "--admin", admin])
            stats.process.waitUntilExit()
            #expect(stats.process.terminationStatus == 0)
            #expect(stats.stdout.contains("hit ratio"))
            // The proxy's requests apart from the admin calls (this command's among them).
            let proxied = try larder.stats().requests
            let through = (proxied["total"] ?? 0) - (proxied["admin"] ?? 0)
            #expect(through > 0 && stats.stdout.contains("Requests      \(through) through the proxy"), "\(stats.stdout)")
            #expect(stats.stdout.contains(" admin call"), "\(stats.stdout)")
            // Numbers as the table writes them: one decimal, sizes with a binary unit.
            #expect(stats.stdout.range(of: #"hit ratio [0-9]+\.[0-9] %"#, options: .regularExpression) != nil, "\(stats.stdout)")
            #expect(
                stats.stdout.range(of: #"from upstream [0-9]+(\.[0-9] [KMGT]iB| B)"#, options: .regularExpression) != nil, "\(stats.stdout)"
            )
            #expect(stats.stdout.contains("127.0.0.1:\(origin.port)"))
            let purge = try ChildProcess(Paths.larder, ["purge", "--admin", admin, urls[0]])
            purge.process.waitUntilExit()
            #expect(purge.stdout.contains("purged \(urls[0])"))
            #expect(try Curl.viaProxy(larder.proxy, [urls[0]]).cacheStatus?.hit == false)
        }

        @Test func accessLogLinesAndJournalPriorities() throws {
            let origin = try Origin()
            let larder = try Larder(environment: ["JOURNAL_STREAM": "8:12345"])
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/logged?cc=max-age=60")])
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/logged?cc=max-age=60")])
            larder.stop()
            let lines = larder.child.stdout.split(separator: "\n")
            #expect(lines.count == 2, "one line per request: \(lines)")
            #expect(lines.allSatisfy { $0.hasPrefix("<6>") })
            #expect(lines.allSatisfy { $0.contains(" 127.0.0.1 \"GET ") }, "the client's address: \(lines)")
            #expect(lines.first?.contains("\"GET \(origin.url("/logged?cc=max-age=60"))\" 200 miss") == true)
            #expect(lines.last?.contains("200 hit 64") == true)
            #expect(larder.child.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("<") }, "stderr lines carry priorities")
        }
    }
}

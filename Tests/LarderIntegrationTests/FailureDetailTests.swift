import Foundation
import Testing

extension IntegrationTests {
    /// The access log says why a request failed (docs/OPERATIONS.md, "Access log"): the same
    /// cause in every format, and a tunnel's line keeps its CONNECT's User-Agent.
    @Suite(.timeLimit(.minutes(3))) struct FailureDetail {
        /// The requests of every test below, by what should fail them.
        struct Failures {
            let dns: String
            let connect: String
            let timeout: String
            let refused: String
            let digest: String
            let success: String
        }

        /// Runs one request of each failure kind, a success and a tunnel through a daemon logging
        /// in `format`; returns the lines (a request's found by its URL) and the URLs used.
        static func logged(format: String) throws -> (lines: [String], failures: Failures, tunnelTarget: String) {
            let origin = try Origin()
            let dead = try freePort()
            let layer = "the real layer"
            let blob = "/v2/lib/a/blobs/sha256:\(try SharedKeys.digest(layer))"
            try origin.script(blob, [.init(body: "a forged layer")], conditional: false)
            let larder = try Larder(
                config: """
                    [log]
                    access_format = "\(format)"
                    [proxy]
                    connect_ports = [\(origin.port)]
                    deny_destinations = ["127.0.0.2/32"]
                    [cache]
                    presets = ["oci"]
                    [retry]
                    strategy = "none"
                    [upstream]
                    timeout = "1s"
                    connect_timeout = "2s"

                    """ + SharedKeys.resolve([("reg.test", origin)]).replacingOccurrences(of: "[upstream]\n", with: ""))
            let failures = Failures(
                dns: "http://nowhere.invalid:\(origin.port)/dns",
                connect: "http://127.0.0.1:\(dead)/connect",
                timeout: origin.url("/timeout?hang=1"),
                refused: "http://127.0.0.2:\(origin.port)/refused",
                digest: "http://reg.test:\(origin.port)\(blob)",
                success: origin.url("/fine?cc=max-age=60"))
            let agent = ["-A", "Failing-Agent/1"]
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.dns]).status == 502)
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.connect]).status == 502)
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.timeout]).status == 504)
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.refused]).status == 403)
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.digest]).status == 502)
            #expect(try Curl.viaProxy(larder.proxy, agent + [failures.success]).status == 200)
            let tunnelled = try Curl.viaProxy(larder.proxy, ["--proxytunnel", "-A", "Tunnel-Agent/2", origin.url("/inside?size=10")])
            #expect(tunnelled.status == 200, "\(tunnelled.stderr)")
            let tunnelTarget = "127.0.0.1:\(origin.port)"
            var lines: [String] = []
            _ = waitUntil(seconds: 10) {
                lines = larder.child.stdout.split(separator: "\n").map(String.init)
                return lines.count >= 7 && lines.contains { $0.contains(tunnelTarget) && $0.contains("CONNECT") }
            }
            return (lines, failures, tunnelTarget)
        }

        static func line(_ lines: [String], _ url: String) -> String {
            lines.first { $0.contains(url) && !$0.contains(" CONNECT ") && !$0.contains("\"CONNECT") } ?? "no line for \(url) in \(lines)"
        }

        /// Larder's own error answers are logged with the body bytes the client got, and a stale
        /// copy answering for an origin that failed (stale-if-error) names how it failed.
        @Test func generatedAnswersLogTheirBytesAndAStaleAnswerItsOriginsFailure() throws {
            var origin: Origin? = try Origin()
            let dead = try freePort()
            let larder = try Larder(config: "[retry]\nstrategy = \"none\"\n")
            let failed = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(dead)/gone"])
            #expect(failed.status == 502 && !failed.body.isEmpty)
            let url = try #require(origin).url("/kept?cc=max-age=1")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            origin = nil  // stopped: its port refuses connections
            Thread.sleep(forTimeInterval: 2.5)  // past the copy's max-age
            let stale = try Curl.viaProxy(larder.proxy, [url])
            #expect(stale.status == 200 && stale.header("cache-status")?.contains("stale-if-error") == true, "\(stale.headers)")
            var lines: [String] = []
            _ = waitUntil(seconds: 10) {
                lines = larder.child.stdout.split(separator: "\n").map(String.init)
                return lines.filter { $0.contains("/kept") }.count >= 2
            }
            let gone = Self.line(lines, "/gone")
            #expect(gone.contains(" 502 error \(failed.body.count) "), "\(gone)")
            let served = lines.last { $0.contains("/kept") } ?? "\(lines)"
            #expect(served.contains(" 200 stale \(stale.body.count) ") && served.hasSuffix(" detail=connect"), "\(served)")
            #expect(!(try larder.stats().recentFailures ?? []).contains { $0.url.contains("/kept") })
        }

        @Test func larderLinesEndWithTheCause() throws {
            let (lines, failures, target) = try Self.logged(format: "larder")
            for (url, cause) in [
                (failures.dns, "dns"), (failures.connect, "connect"), (failures.timeout, "timeout"), (failures.refused, "refused"),
                (failures.digest, "digest"),
            ] {
                #expect(Self.line(lines, url).hasSuffix(" detail=\(cause)"), "\(Self.line(lines, url))")
            }
            #expect(!Self.line(lines, failures.success).contains("detail="))
            let tunnel = lines.first { $0.contains("\"CONNECT \(target)\"") } ?? "\(lines)"
            #expect(tunnel.contains(" tunnel ") && tunnel.contains(" ua=\"Tunnel-Agent/2\""), "\(tunnel)")
        }

        @Test func jsonLinesHaveADetailField() throws {
            let (lines, failures, target) = try Self.logged(format: "json")
            func object(_ line: String) -> [String: Any] {
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
            }
            for (url, cause) in [
                (failures.dns, "dns"), (failures.connect, "connect"), (failures.timeout, "timeout"), (failures.refused, "refused"),
                (failures.digest, "digest"),
            ] {
                let parsed = object(Self.line(lines, url))
                #expect(parsed["detail"] as? String == cause, "\(Self.line(lines, url))")
                #expect(parsed["user_agent"] as? String == "Failing-Agent/1")
            }
            #expect(object(Self.line(lines, failures.success))["detail"] == nil)
            let tunnel = lines.map(object).first { $0["method"] as? String == "CONNECT" && $0["url"] as? String == target }
            #expect(tunnel?["user_agent"] as? String == "Tunnel-Agent/2", "\(lines)")
        }

        /// A trailing quoted field on failed lines only; GoAccess's COMBINED still reads them all.
        @Test func combinedLinesEndWithTheCauseAndGoAccessReadsThem() throws {
            let (lines, failures, target) = try Self.logged(format: "combined")
            for (url, cause) in [
                (failures.dns, "dns"), (failures.connect, "connect"), (failures.timeout, "timeout"), (failures.refused, "refused"),
                (failures.digest, "digest"),
            ] {
                #expect(Self.line(lines, url).hasSuffix("\"Failing-Agent/1\" \"\(cause)\""), "\(Self.line(lines, url))")
            }
            #expect(Self.line(lines, failures.success).hasSuffix("\"-\" \"Failing-Agent/1\""))
            let tunnel = lines.first { $0.contains("\"CONNECT \(target) ") } ?? "\(lines)"
            #expect(tunnel.hasSuffix("\"Tunnel-Agent/2\""), "\(tunnel)")

            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/access.log", atomically: true, encoding: .utf8)
            let goaccess = try ChildProcess(
                "/usr/bin/goaccess", [directory + "/access.log", "--log-format=COMBINED", "-o", directory + "/report.json"],
                environment: ["PATH": "/usr/bin:/bin"])
            goaccess.waitUntilExit()
            let general =
                (try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json")))
                as? [String: Any])?["general"] as? [String: Any]
            #expect(general?["total_requests"] as? Int == lines.count, "\(goaccess.stderr)")
            #expect(general?["failed_requests"] as? Int == 0)
        }

        /// Squid's convention: `TCP_DENIED` for a refusal, `_TIMEDOUT` for a timeout, and
        /// `%err_code/%err_detail` in the last field; still ten fields that calamaris reads.
        @Test func squidLinesCarrySquidsErrorCodes() throws {
            let (lines, failures, _) = try Self.logged(format: "squid")
            for (url, code, cause) in [
                (failures.dns, "TCP_MISS/502", "ERR_DNS_FAIL/dns"), (failures.connect, "TCP_MISS/502", "ERR_CONNECT_FAIL/connect"),
                (failures.timeout, "TCP_MISS_TIMEDOUT/504", "ERR_READ_TIMEOUT/timeout"),
                (failures.refused, "TCP_DENIED/403", "ERR_ACCESS_DENIED/refused"),
                (failures.digest, "TCP_MISS/502", "ERR_INVALID_RESP/digest"),
            ] {
                let fields = Self.line(lines, url).split(separator: " ", omittingEmptySubsequences: true)
                #expect(fields.count == 10, "\(fields)")
                #expect(fields.count == 10 && fields[3] == code && fields[9] == cause, "\(fields)")
            }
            #expect(Self.line(lines, failures.success).hasSuffix(" -"))

            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/access.log", atomically: true, encoding: .utf8)
            let calamaris = try ChildProcess(
                "/bin/sh", ["-c", "calamaris -a < \"$0\"", directory + "/access.log"], environment: ["PATH": "/usr/bin:/bin"])
            calamaris.waitUntilExit()
            let report = calamaris.stdout
            func figure(_ label: String) -> Int? {
                report.split(separator: "\n").first { $0.hasPrefix(label) }.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) }
            }
            #expect(figure("lines parsed:") == lines.count, "\(report)")
            #expect(figure("invalid lines:") == 0)
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// SIGHUP re-reads the file: good files apply to new requests, bad ones change nothing.
    @Suite(.timeLimit(.minutes(3))) struct Reload {
        @Test func validFileAppliesToNewRequests() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/r?cc=max-age=60"
            _ = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.isMemoryHit == true)
            try larder.reload(
                """
                [[route]]
                match = "http://127.0.0.1:*/r*"
                policy = "network_only"
                """)
            let after = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(after.cacheStatus?.hit != true)
            #expect(try origin.count(path) == 2)
        }

        @Test func invalidFileKeepsTheRunningConfigAndLogsEveryError() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"30s\"\n")
            try larder.rewriteConfig("[upstream]\ntimeout = 30\n[proxy]\nbogus = 1\n")
            larder.child.signal(SIGHUP)
            let log = try larder.child.waitForOutput { $0.contains("keeping the running configuration") }
            #expect(log.contains("larder.toml:2:11: expected a duration"))
            #expect(log.contains("larder.toml:4:1: unknown key 'bogus' in [proxy]"), "the table the key is under")
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/still")]).status == 200)
        }

        @Test func restartOnlySettingsAreReportedNotIgnored() throws {
            let larder = try Larder()
            try larder.rewriteConfig("[proxy]\nworkers = 2\n")
            larder.child.signal(SIGHUP)
            let log = try larder.child.waitForOutput { $0.contains("reloaded") }
            #expect(log.contains("proxy.workers changed but needs a restart"))
        }

        @Test func requestInFlightFinishesUnderItsConfiguration() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"10s\"\n")
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send("GET \(origin.url("/slow?delay=1.5")) HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(300_000)
            try larder.reload("[upstream]\ntimeout = \"1s\"\n")
            #expect(try connection.readResponse().status == 200, "the old 10s timeout still applies")
            // A new request gets the new 1s timeout.
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/slow2?delay=1.5")]).status == 504)
        }

        @Test func checkConfigReportsValidAndInvalidFiles() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let good = try ChildProcess(Paths.larder, ["check-config", Paths.root + "/config/larder.toml"])
            good.process.waitUntilExit()
            #expect(good.process.terminationStatus == 0)
            #expect(good.stdout.contains("OK"))
            try "[proxy]\nheader_timeout = 5\n[retyr]\n".write(toFile: directory + "/bad.toml", atomically: true, encoding: .utf8)
            let bad = try ChildProcess(Paths.larder, ["check-config", directory + "/bad.toml"])
            bad.process.waitUntilExit()
            #expect(bad.process.terminationStatus == 1)
            let output = try bad.waitForOutput { $0.contains("2 errors") }
            #expect(output.contains("bad.toml:2:18: expected a duration"))
            #expect(output.contains("bad.toml:3:1: unknown section [retyr] (did you mean 'retry'?)"))
        }
    }
}

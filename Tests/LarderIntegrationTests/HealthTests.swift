import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Honest health: a disk tier that cannot work shows in /healthz, /stats and /metrics alike,
    /// and `disk.required` refuses to start without it; the process metrics; bind errors.
    @Suite(.timeLimit(.minutes(2))) struct Health {
        /// A cache path under a regular file: no directory can be made there, even as root.
        static func unusableCachePath() throws -> (path: String, cleanup: String) {
            let directory = Paths.temporaryDirectory()
            let blocker = directory + "/a-file"
            try "not a directory\n".write(toFile: blocker, atomically: true, encoding: .utf8)
            return (blocker + "/cache", directory)
        }

        /// `larder serve` with `config` written into `directory` (the caller's, removed by it).
        static func serve(_ config: String, cache: String, environment: [String: String], in directory: String) throws -> ChildProcess {
            let path = directory + "/larder.toml"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            return try ChildProcess(
                Paths.larder,
                ["serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--cache-dir", cache],
                environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
        }

        @Test func anUnusableCacheDirectoryIsUnhealthyInEveryView() throws {
            let (cache, cleanup) = try Self.unusableCachePath()
            defer { try? FileManager.default.removeItem(atPath: cleanup) }
            let origin = try Origin()
            let larder = try Larder(config: "[disk]\nrequired = false\n", cacheDirectory: cache)
            let health = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"])
            #expect(health.status == 503)
            #expect(health.text.contains("disk tier unavailable") && health.text.contains(cache), "\(health.text)")
            let summary = try larder.stats().health
            #expect(summary?.status == "unhealthy")
            #expect(summary?.problems.first?.contains(cache) == true)
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("\nlarder_disk_degraded 1"), "the gauge agrees with /healthz")
            // Still a proxy, memory-only.
            let url = origin.url("/health?cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.isMemoryHit == true)
        }

        @Test func aRequiredDiskTierRefusesToStartAndSystemdMakesItRequired() throws {
            let (cache, cleanup) = try Self.unusableCachePath()
            defer { try? FileManager.default.removeItem(atPath: cleanup) }
            let required = try Self.serve("[disk]\nrequired = true\n", cache: cache, environment: [:], in: cleanup)
            required.waitUntilExit()
            #expect(required.terminationStatus == 1)
            #expect(required.stderr.contains("cannot start: disk tier unavailable (\(cache))"), "\(required.stderr)")
            #expect(required.stderr.contains("disk.required = false"), "says how to run memory-only")

            // "auto" (the default): required when systemd started the process ($INVOCATION_ID).
            let underSystemd = try Self.serve("", cache: cache, environment: ["INVOCATION_ID": "0123456789abcdef"], in: cleanup)
            underSystemd.waitUntilExit()
            #expect(underSystemd.terminationStatus == 1, "\(underSystemd.stderr)")
            let byHand = try Self.serve("", cache: cache, environment: [:], in: cleanup)
            _ = try byHand.waitForOutput { $0.contains("listening") }
            byHand.kill()
        }

        @Test func processMetricsAreExported() throws {
            let larder = try Larder()
            let text = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            func value(_ name: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
            }
            #expect((value("process_cpu_seconds_total") ?? -1) >= 0)
            #expect((value("process_resident_memory_bytes") ?? 0) > 1_048_576)
            #expect((value("process_open_fds") ?? 0) >= 3)
            #expect((value("process_max_fds") ?? 0) >= (value("process_open_fds") ?? .infinity))
            let started = value("process_start_time_seconds") ?? 0
            #expect(abs(started - Date().timeIntervalSince1970) < 120, "started \(started)")
            #expect(text.contains("# TYPE process_cpu_seconds_total counter"))
        }

        @Test func aBindErrorNamesTheAddress() throws {
            // TEST-NET-1 (RFC 5737) is on no interface here: bind fails with EADDRNOTAVAIL.
            let address = "192.0.2.1:3128"
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let child = try ChildProcess(
                Paths.larder, ["serve", "--listen", address, "--admin-listen", "127.0.0.1:0", "--cache-dir", directory + "/cache"],
                environment: ["PATH": "/usr/bin:/bin"])
            child.waitUntilExit()
            #expect(child.terminationStatus == 1)
            #expect(child.stderr.contains("bind \(address) (proxy.listen)"), "\(child.stderr)")
        }
    }
}

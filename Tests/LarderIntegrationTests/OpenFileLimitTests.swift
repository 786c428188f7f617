import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// At start the soft open-file limit is raised to the hard one, and a warning comes only
    /// when even that cannot hold proxy.max_connections clients (docs/OPERATIONS.md, "Open files").
    @Suite(.timeLimit(.minutes(2))) struct OpenFileLimit {
        private static let warning = "the open-file limit holds fewer client connections"

        /// The hard limit this process (and so a child) has.
        private static func hardLimit() -> Int {
            var limit = rlimit()
            guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
            return Int(clamping: limit.rlim_max)
        }

        private static func maxFiles(_ larder: Larder) throws -> Int? {
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("process_max_fds ") }
            return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
        }

        @Test func aDefaultStartRaisesTheSoftLimitAndDoesNotWarnWhenTheHardOneHoldsTheConnections() throws {
            // A hard limit of twice the default max_connections (10000), or, where this machine
            // allows less, max_connections set to half of what it allows.
            let hard = min(Self.hardLimit(), 20_000)
            try #require(hard >= 2_000, "this machine's hard open-file limit is \(hard)")
            let config = hard >= 20_000 ? "" : "[proxy]\nmax_connections = \(hard / 2)\n"
            let larder = try Larder(config: config, launcher: ["/usr/bin/prlimit", "--nofile=1024:\(hard)"])
            #expect(try Self.maxFiles(larder) == hard, "the soft limit was raised from 1024 to the hard one")
            #expect(!larder.child.stderr.contains(Self.warning), "\(larder.child.stderr)")
            #expect(!larder.child.stderr.contains("open-file"), "\(larder.child.stderr)")
        }

        /// Out of descriptors with connections still waiting to be accepted, the loops do not
        /// spin on the listening socket (which stays readable): each stops watching it for a
        /// moment, and accepts again once descriptors are free.
        @Test func runningOutOfDescriptorsDoesNotSpinTheLoops() throws {
            let origin = try Origin()
            let larder = try Larder(launcher: ["/usr/bin/prlimit", "--nofile=160:160"])
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/before")]).status == 200)
            let flood = try ChildProcess("/usr/bin/env", ["python3", Paths.floodScript, String(larder.proxyPort), "400"])
            defer { _ = flood.stop() }
            _ = try flood.waitForOutput(timeout: 60, stream: \.stdout) { $0.contains("OPEN ") }
            usleep(500_000)
            let before = larder.child.cpuTicks()
            usleep(3_000_000)
            let spent = larder.child.cpuTicks() - before
            // A loop woken at once, again and again, takes a whole CPU: 300 ticks in 3 s.
            #expect(spent < 60, "\(spent) clock ticks of CPU in 3 s with the flood held")
            #expect(larder.child.stderr.contains("out of file descriptors"), "\(larder.child.stderr)")
            _ = flood.stop()  // its connections close
            var status = 0
            var body = ""
            for _ in 0..<50 where status != 200 {
                let result = try? Curl.viaProxy(larder.proxy, [origin.url("/after")])
                status = result?.status ?? 0
                body = result?.text ?? ""
                if status != 200 { usleep(100_000) }
            }
            #expect(status == 200, "accepting again once the flood has gone: \(body)")
            #expect(larder.child.isRunning)
        }

        @Test func aHardLimitBelowTheConnectionsWarnsOnce() throws {
            try #require(Self.hardLimit() >= 6_000)
            let larder = try Larder(launcher: ["/usr/bin/prlimit", "--nofile=1024:6000"])
            #expect(try Self.maxFiles(larder) == 6_000)
            let log = larder.child.stderr
            #expect(log.components(separatedBy: Self.warning).count - 1 == 1, "\(log)")
            #expect(log.contains("limit=6000") && log.contains("max_connections=10000"), "\(log)")
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// What a reload says: the keys it could not apply with their running values, what runs
    /// after it, and log.level applied (docs/OPERATIONS.md, "Reload").
    @Suite(.timeLimit(.minutes(3))) struct ReloadMessages {
        private func occurrences(of text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

        @Test func aListenChangeIsNamedAndTheClosingLineSaysWhatRuns() throws {
            // The file's own address (no --listen, which would override it on every reload).
            let larder = try Larder(config: "[proxy]\nlisten = [\"127.0.0.1:0\"]\n", listen: [])
            let running = "127.0.0.1:\(larder.proxyPort)"
            try larder.rewriteConfig("[proxy]\nlisten = [\"127.0.0.2:0\"]\n[memory]\nmax_bytes = \"64MiB\"\n")
            larder.child.signal(SIGHUP)
            let log = try larder.child.waitForOutput { $0.contains("reloaded") }
            #expect(log.contains("reload: proxy.listen changed but needs a restart; still running \(running) file=127.0.0.2:0"), "\(log)")
            let closing = try #require(log.split(separator: "\n").first { $0.contains("reloaded") })
            #expect(closing.contains("proxy \(running);"), "the closing line names the address that runs: \(closing)")
            #expect(!closing.contains("127.0.0.2"), "\(closing)")
            #expect(closing.contains("memory 64MiB"), "the keys a reload applies are applied: \(closing)")
            #expect(closing.hasSuffix("not applied until a restart: proxy.listen"), "\(closing)")
            let origin = try Origin()
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/still")]).status == 200, "still serving where it was")
        }

        @Test func logLevelAppliesOnReload() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n[log]\nlevel = \"info\"\n")
            // The origin closes a kept connection after answering: Larder counts it, and logs it
            // at debug.
            func closedIdle(_ path: String, until expected: Int) throws -> Int {
                var script = RawOrigin.Script("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok")
                script.late = (0.1, [])
                origin.script(path, script)
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
                var count = 0
                for _ in 0..<100 {
                    let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
                    let line = metrics.split(separator: "\n").first { $0.hasPrefix("larder_upstream_idle_closed_total{reason=\"closed\"}") }
                    count = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
                    if count >= expected { break }
                    usleep(50_000)
                }
                return count
            }
            let message = "closed an idle upstream connection the origin had closed"
            #expect(try closedIdle("/before", until: 1) == 1)
            #expect(!larder.child.stderr.contains(message), "at info, the debug line is not written")

            try larder.reload("[proxy]\nworkers = 1\n[log]\nlevel = \"debug\"\n")
            #expect(try closedIdle("/after", until: 2) == 2)
            let log = try larder.child.waitForOutput { $0.contains(message) }
            #expect(occurrences(of: message, in: log) == 1, "written once the reload made the level debug")
            #expect(!log.contains("log.level changed but needs a restart"))
        }
    }
}

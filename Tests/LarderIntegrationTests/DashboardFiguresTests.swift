import Foundation
import LarderServer
import Testing

extension IntegrationTests {
    /// The dashboard's figures in headless Chromium (docs/OPERATIONS.md, "Dashboard"): hit and
    /// miss latency as `/stats` has them, the last failures with their cause, a chart the
    /// daemon's own history fills before the page opened, and the bytes saved per route.
    @Suite(.timeLimit(.minutes(3))) struct DashboardFigures {
        @Test func latencyFailuresHistoryAndRoutesAreShownAsStatsHasThem() throws {
            let origin = try Origin()
            let dead = try freePort()
            let route = "http://127.0.0.1:\(origin.port)/r/*"
            // Samples every 50 ms: the 15-minute window of 90 samples is full within seconds.
            let larder = try Larder(
                config: "[retry]\nstrategy = \"none\"\n[[route]]\nmatch = \"\(route)\"\npolicy = \"cache_first\"\nttl = \"1h\"\n",
                environment: ["LARDER_HISTORY_INTERVAL_MS": "50"])
            for name in ["a", "b", "c"] {
                for _ in 0..<2 { #expect(try Curl.viaProxy(larder.proxy, [origin.url("/r/\(name)?size=1500")]).status == 200) }
            }
            #expect(try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(dead)/gone?token=hunter2&page=3"]).status == 502)

            var history: StatsDocument.History?
            let full = waitUntil(seconds: 20) {
                history = (try? larder.stats())?.history
                guard let history else { return false }
                return !history.samples.isEmpty && history.samples.count == history.capacity
            }
            #expect(full, "the daemon's history fills without a page open: \(String(describing: history))")
            #expect(history?.capacity == 90 && history?.intervalSeconds == 0.05)

            guard let (dom, _) = try Operations.renderDashboard(larder) else { return }
            let stats = try larder.stats()
            func shown(_ id: String) -> Double? { Operations.shown(id, in: dom) }

            let latency = try #require(stats.latency)
            for (kind, figures) in [("hit", latency.hit), ("miss", latency.miss)] {
                #expect(figures.count == 3, "\(kind): \(figures)")
                let p50 = figures.p50Seconds
                let p99 = figures.p99Seconds
                #expect(p50 != nil && p99 != nil && p50! > 0 && p50! <= p99!, "\(kind): \(figures)")
                #expect(shown("latency-\(kind)-p50") == p50, "\(kind) p50 as /stats has it")
                #expect(shown("latency-\(kind)-p99") == p99, "\(kind) p99 as /stats has it")
                #expect(shown("latency-\(kind)-count") == 3)
            }
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("larder_request_duration_by_result_seconds_count{result=\"hit\"} 3"), "\(metrics)")

            #expect(dom.contains("<tr data-cause=\"connect\" data-status=\"502\">"), "the failure and its cause: \(dom)")
            #expect(dom.contains("/gone?token=") && dom.contains("page=3"), "its URL")
            #expect(!dom.contains("hunter2"), "the query's credential redacted as in the access log")

            #expect(shown("history-samples") == 90, "the chart is drawn from a full window")
            #expect((shown("history-span") ?? 0) >= 89 * 0.05, "spanning the whole window")
            #expect(dom.contains(">4.5 s ago</span>"), "the axis names the window's start")

            let routes = stats.routes ?? []
            let saved = routes.first { $0.route == route }?.bytesSaved
            #expect(saved == 3 * 1500, "\(routes)")
            let row = dom.range(of: "<tr data-route=\"\(route)\">").map { String(dom[$0.lowerBound...].prefix(600)) } ?? ""
            #expect(row.contains("data-value=\"\(3 * 1500)\""), "bytes saved on the route's row: \(row)")
        }

        /// A client that is not a user cannot push the users' failures out of the list with
        /// 407s: only requests that passed authentication are listed (the others are still
        /// counted), each with the client's address, on the dashboard too.
        @Test func onlyAdmittedRequestsFailuresAreListedEachWithItsClient() throws {
            let alice = try hashPassword(user: "alice", password: "correct horse")
            let dead = try freePort()
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(alice)\"]\n[retry]\nstrategy = \"none\"\n")
            let mine = "http://127.0.0.1:\(dead)/mine"
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:correct horse", mine]).status == 502)
            for index in 0..<21 {
                #expect(try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(dead)/flood/\(index)"]).status == 407)
            }
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:wrong", "http://127.0.0.1:\(dead)/wrong"]).status == 407)

            let stats = try larder.stats()
            let failures = stats.recentFailures ?? []
            #expect(failures.count == 1, "\(failures)")
            #expect(failures.first?.url == mine, "\(failures)")
            #expect(failures.first?.client == "127.0.0.1", "\(failures)")
            #expect(stats.refused.proxyAuth == 22, "the refusals are still counted")

            guard let (dom, _) = try Operations.renderDashboard(larder) else { return }
            #expect(dom.contains("<td>127.0.0.1</td><td>GET \(mine)</td>"), "the client on the failure's row: \(dom)")
        }
    }
}

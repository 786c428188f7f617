import LarderConfig
import LarderHTTP
import LarderUpstream
import Testing

@Suite(.timeLimit(.minutes(1))) struct ParentPlanTests {
    static func plan(_ parents: [String], selection: ParentSelection = .hash, direct: [String] = []) -> ParentPlan {
        var upstream = UpstreamConfig()
        upstream.parents = parents
        upstream.parentSelection = selection
        upstream.direct = direct.map { HostRule(parsing: $0)! }
        return ParentPlan(upstream)
    }

    static func url(_ text: String) -> AbsoluteURL { try! AbsoluteURL(parsing: text) }

    static let urls = (0..<3000).map { url("http://example.org/object/\($0)?v=1") }

    @Test func hashGivesEachURLAStableHomeAndSpreadsThem() {
        let plan = Self.plan(["http://p1:3128", "http://p2:3128", "http://p3:3128"])
        var counts: [String: Int] = [:]
        for url in Self.urls {
            let first = plan.candidates(for: url, routeParent: nil)
            #expect(first.count == 3)
            #expect(plan.candidates(for: url, routeParent: nil) == first, "the same order every time")
            counts[first[0].label, default: 0] += 1
        }
        // Each parent is home to about a third (binomial: ±5% is over 6 standard deviations).
        for (_, count) in counts { #expect(abs(count - 1000) < 150, "\(counts)") }
    }

    @Test func removingAParentMovesOnlyTheURLsItWasHomeTo() {
        let three = Self.plan(["http://p1:3128", "http://p2:3128", "http://p3:3128"])
        let two = Self.plan(["http://p1:3128", "http://p3:3128"])
        var moved = 0
        for url in Self.urls {
            let before = three.candidates(for: url, routeParent: nil)[0].label
            let after = two.candidates(for: url, routeParent: nil)[0].label
            if before == "http://p2:3128" {
                // The next-highest score takes over: the same as the three-parent plan's second.
                #expect(after == three.candidates(for: url, routeParent: nil)[1].label)
                moved += 1
            } else {
                #expect(after == before)
            }
        }
        #expect(moved > 0)
    }

    @Test func failoverKeepsTheConfiguredOrder() {
        let plan = Self.plan(["http://b:1", "http://a:1"], selection: .failover)
        #expect(plan.candidates(for: Self.url("http://x/"), routeParent: nil).map(\.url) == ["http://b:1", "http://a:1"])
    }

    @Test func directRulesAndRoutesBypassParents() {
        let plan = Self.plan(["http://p:1"], direct: ["localhost", "*.internal", "10.0.0.0/8", "fd00::/8"])
        for target in [
            "http://localhost:8080/", "http://LOCALHOST/", "http://a.internal/", "http://b.c.internal/x", "http://10.1.2.3/",
            "http://[fd00::1]:80/",
        ] {
            #expect(plan.candidates(for: Self.url(target), routeParent: nil).isEmpty, "\(target) goes direct")
        }
        for target in ["http://internal/", "http://xinternal/", "http://11.0.0.1/", "http://example.org/", "http://[fe80::1]/"] {
            #expect(plan.candidates(for: Self.url(target), routeParent: nil).count == 1, "\(target) goes through the parent")
        }
        #expect(plan.candidates(for: Self.url("http://example.org/"), routeParent: "direct").isEmpty)
        #expect(plan.candidates(for: Self.url("http://a.internal/"), routeParent: "http://q:2").map(\.url) == ["http://q:2"])
        #expect(Self.plan([]).candidates(for: Self.url("http://example.org/"), routeParent: nil).isEmpty)
    }

    @Test func labelsNeverCarryCredentials() {
        #expect(ParentPlan.redact("http://user:s3cret@parent:3128") == "http://parent:3128")
        #expect(ParentPlan.redact("http://a@b:c@parent:3128/") == "http://parent:3128/")
        #expect(ParentPlan.redact("http://parent:3128") == "http://parent:3128")
    }

    @Test func connectEndpointsComeFromHTTPParentURLs() {
        let plain = ParentPlan.Parent(url: "http://parent.example:3128").endpoint
        #expect(plain?.host == "parent.example")
        #expect(plain?.port == 3128)
        #expect(plain?.authorization == nil)
        let withCredentials = ParentPlan.Parent(url: "http://us%65r:p%40ss%20word@10.0.0.1:8080/").endpoint
        #expect(withCredentials?.host == "10.0.0.1")
        #expect(withCredentials?.authorization == BasicCredentials(user: "user", password: "p@ss word").headerValue)
        #expect(ParentPlan.Parent(url: "http://[::1]").endpoint?.port == 1080, "libcurl's default proxy port")
        #expect(ParentPlan.Parent(url: "http://[::1]").endpoint?.host == "::1")
        #expect(ParentPlan.Parent(url: "socks5://p:1080").endpoint == nil)
        #expect(ParentPlan.Parent(url: "https://p:443").endpoint == nil)
        #expect(ParentPlan.Parent(url: "http://u:%zz@p:1").endpoint == nil, "bad percent-encoding")
    }

    @Test func healthMovesParentsThatBackOffToTheEnd() {
        let health = ParentHealth()
        let plan = Self.plan(["http://a:1", "http://b:1", "http://c:1"], selection: .failover)
        let candidates = plan.candidates(for: Self.url("http://x/"), routeParent: nil)
        health.recordFailure(candidates[0], backoff: .seconds(60), now: 1_000)
        #expect(health.order(candidates, now: 2_000).map(\.url) == ["http://b:1", "http://c:1", "http://a:1"])
        #expect(health.snapshot()["http://a:1"]?.skips == 1)
        // After the back-off it is first again; an answer clears it at once.
        #expect(health.order(candidates, now: 1_000 + 61_000_000_000).map(\.url) == ["http://a:1", "http://b:1", "http://c:1"])
        health.recordFailure(candidates[0], backoff: .seconds(60), now: 5_000)
        health.recordSuccess(candidates[0])
        #expect(health.order(candidates, now: 6_000)[0].url == "http://a:1")
    }
}

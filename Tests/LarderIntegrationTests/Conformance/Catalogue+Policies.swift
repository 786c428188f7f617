/// Larder's per-route cache policies (DESIGN "Policies").
enum PolicyCases {
    static func route(_ policy: String, ttl: String? = nil) -> String {
        "[[route]]\nmatch = \"http://127.0.0.1:*/*\"\npolicy = \"\(policy)\"\n" + (ttl.map { "ttl = \"\($0)\"\n" } ?? "")
    }

    static var all: [ConformanceCase] {
        [
            ConformanceCase(
                section: "policy", name: "cache_first never stores a no-store response", script: [ok(cc("no-store"))],
                steps: notReused(), config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "cache_first never stores a private response", script: [ok(cc("private"))],
                steps: notReused(), config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "cache_first ignores max-age=0", script: [ok(cc("max-age=0"))], steps: storedAndHit(),
                config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "cache_first hits report the route's remaining ttl, not the origin's",
                script: [ok(cc("max-age=0"), header("Age", "300"))],
                steps: [
                    get(origin: 1),
                    get(
                        origin: 1, hit: true,
                        check: { response in
                            let ttl = response.header("cache-status")?.split(separator: ";").first { $0.contains("ttl=") }
                                .flatMap { Int($0.split(separator: "=")[1]) }
                            return (ttl ?? -1) > 3000 ? nil : "ttl \(ttl.map(String.init) ?? "absent"), expected about 3300"
                        }),
                ], config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "cache_first ignores the client's no-cache", script: [ok(cc("no-cache"))],
                steps: [get(origin: 1), get(cc("no-cache"), origin: 1, hit: true)], config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "cache_first refetches past its ttl", script: [ok(cc("no-cache"))],
                steps: [get(origin: 1), get(origin: 2, hit: false, wait: 1.2)], config: route("cache_first", ttl: "1s")),
            ConformanceCase(
                section: "policy", name: "cache_first still refuses Set-Cookie responses", script: [ok(header("Set-Cookie", "a=1"))],
                steps: notReused(), config: route("cache_first", ttl: "1h")),
            ConformanceCase(
                section: "policy", name: "network_only never answers from cache", script: [ok(maxAgeHour)], steps: notReused(),
                config: route("network_only")),
            ConformanceCase(
                section: "policy", name: "cache_then_network answers from cache and refreshes in the background",
                script: [ok(maxAgeHour, body: "v1"), ok(maxAgeHour, body: "v2")],
                steps: [get(origin: 1, body: "v1"), get(hit: true, body: "v1"), get(hit: true, body: "v2", wait: 0.5, originAtLeast: 2)],
                config: route("cache_then_network")),
            ConformanceCase(
                section: "policy", name: "the stale_while_revalidate policy serves fresh copies without refreshing",
                script: [ok(maxAgeHour, body: "v1"), ok(maxAgeHour, body: "v2")],
                steps: [get(origin: 1), get(origin: 1, hit: true), get(origin: 1, hit: true, body: "v1", wait: 0.3)],
                config: route("stale_while_revalidate")),
            ConformanceCase(
                section: "policy", name: "the stale_while_revalidate policy serves stale copies and refreshes, even past must-revalidate",
                script: [staleOnArrival(cc("must-revalidate")), ok(maxAgeHour, body: "v2")],
                steps: [get(origin: 1), get(hit: true, body: "v1"), get(origin: 2, hit: true, body: "v2", wait: 0.5)],
                config: route("stale_while_revalidate")),
            ConformanceCase(
                section: "policy", name: "a route only applies to the URLs it matches", script: [ok(cc("no-store"))], steps: notReused(),
                config: "[[route]]\nmatch = \"http://127.0.0.1:*/elsewhere/*\"\npolicy = \"cache_first\"\nttl = \"1h\"\n"),
        ]
    }
}

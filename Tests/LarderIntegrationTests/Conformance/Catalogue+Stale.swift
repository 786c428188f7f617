/// RFC 5861 (stale-while-revalidate, stale-if-error) and RFC 9111 §4.2.4.
enum StaleCases {
    /// 5xx answers are retried (3 times by default) before stale-if-error; quickly here.
    static let quickRetries = "[retry]\nbase_delay = \"10ms\"\njitter = \"0s\"\n"

    static var all: [ConformanceCase] {
        [
            ConformanceCase(
                section: "5861.3", name: "stale-while-revalidate serves stale at once and refreshes in the background",
                script: [staleOnArrival(cc("stale-while-revalidate=3600")), ok(maxAgeHour, body: "v2")],
                steps: [
                    get(origin: 1, body: "v1"),
                    get(hit: true, body: "v1", detail: "stale-while-revalidate"),
                    get(origin: 2, hit: true, body: "v2", wait: 0.5),
                ]),
            ConformanceCase(
                section: "5861.3", name: "past the stale-while-revalidate window the request waits for the origin",
                script: [ok(cc("max-age=10, stale-while-revalidate=60"), header("Age", "1000")), ok(maxAgeHour, body: "v2")],
                steps: [get(origin: 1), get(origin: 2, hit: false, body: "v2")]),
            ConformanceCase(
                section: "4.2.4", name: "must-revalidate turns off stale-while-revalidate",
                script: [staleOnArrival(cc("stale-while-revalidate=3600, must-revalidate")), ok(maxAgeHour, body: "v2")],
                steps: [get(origin: 1), get(origin: 2, hit: false, body: "v2")]),
            ConformanceCase(
                section: "5861.4", name: "stale-if-error answers a 500 with the stale copy",
                script: [staleOnArrival(cc("stale-if-error=3600")), ok(status: 500)],
                steps: [get(origin: 1), get(status: 200, origin: 2, body: "v1", fwdStatus: 500, detail: "stale-if-error")]),
            ConformanceCase(
                section: "5861.4", name: "stale-if-error answers a 503 once the retries are spent",
                script: [staleOnArrival(cc("stale-if-error=3600")), ok(status: 503)],
                steps: [get(origin: 1), get(status: 200, origin: 5, body: "v1", fwdStatus: 503)],
                config: quickRetries),
            ConformanceCase(
                section: "5861.4", name: "stale-if-error answers a dropped connection",
                script: [staleOnArrival(cc("stale-if-error=3600")), Scripted(reset: true)],
                steps: [get(origin: 1), get(status: 200, body: "v1", detail: "stale-if-error")]),
            ConformanceCase(
                section: "5861.4", name: "stale-if-error does not hide a 404",
                script: [staleOnArrival(cc("stale-if-error=3600")), ok(status: 404)],
                steps: [get(origin: 1), get(status: 404, origin: 2)]),
            ConformanceCase(
                section: "4.2.4", name: "must-revalidate forbids stale-if-error",
                script: [staleOnArrival(cc("stale-if-error=3600, must-revalidate")), ok(status: 500)],
                steps: [get(origin: 1), get(status: 500, origin: 2)]),
            ConformanceCase(
                section: "5861.4", name: "past every stale-if-error window the error goes through",
                script: [ok(cc("max-age=10"), header("Age", "100000")), ok(status: 500)],
                steps: [get(origin: 1), get(status: 500, origin: 2)]),
            ConformanceCase(
                section: "5861.4", name: "the configured cache.stale_if_error window applies without a directive",
                script: [staleOnArrival(), ok(status: 502)],
                steps: [get(origin: 1), get(status: 200, origin: 5, body: "v1", fwdStatus: 502)],
                config: quickRetries),
            ConformanceCase(
                section: "5861.4", name: "with the window at 0s a 500 goes through",
                script: [staleOnArrival(), ok(status: 500)], steps: [get(origin: 1), get(status: 500, origin: 2)],
                config: "[cache]\nstale_if_error = \"0s\"\n"),
            ConformanceCase(
                section: "5861.4", name: "a request stale-if-error directive allows a stale copy",
                script: [staleOnArrival(), ok(status: 500)],
                steps: [get(origin: 1), get(cc("stale-if-error=100000"), status: 200, origin: 2, body: "v1")],
                config: "[cache]\nstale_if_error = \"0s\"\n"),
            ConformanceCase(
                section: "5861.4", name: "stale-if-error applies during validation too",
                script: [staleOnArrival(etagV1, cc("stale-if-error=3600")), ok(status: 500)], conditional: true,
                steps: [get(origin: 1), get(status: 200, origin: 2, body: "v1", sent: [("If-None-Match", "\"v1\"")], fwdStatus: 500)]),
        ]
    }
}

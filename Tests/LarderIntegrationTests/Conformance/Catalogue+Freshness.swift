/// RFC 9111 §4.2: freshness lifetime, age, heuristics; §5.2.2 response directives.
enum FreshnessCases {
    static var all: [ConformanceCase] {
        [
            ConformanceCase(section: "4.2.1", name: "max-age makes a hit", script: [ok(maxAgeHour)], steps: storedAndHit()),
            ConformanceCase(
                section: "4.2.1", name: "max-age=0 without validators is not reused", script: [ok(cc("max-age=0"))], steps: notReused()),
            ConformanceCase(
                section: "4.2.1", name: "s-maxage wins over max-age (longer)", script: [ok(cc("max-age=0, s-maxage=3600"))],
                steps: storedAndHit()),
            ConformanceCase(
                section: "4.2.1", name: "s-maxage wins over max-age (shorter)", script: [ok(cc("max-age=3600, s-maxage=0"))],
                steps: notReused()),
            ConformanceCase(
                section: "4.2.1", name: "max-age wins over a past Expires", script: [ok(maxAgeHour, header("Expires", "{now-100}"))],
                steps: storedAndHit()),
            ConformanceCase(
                section: "4.2.1", name: "max-age=0 wins over a future Expires",
                script: [ok(cc("max-age=0"), header("Expires", "{now+3600}"))],
                steps: notReused()),
            ConformanceCase(
                section: "5.3", name: "a future Expires makes a hit", script: [ok(header("Expires", "{now+3600}"))], steps: storedAndHit()),
            ConformanceCase(
                section: "5.3", name: "a past Expires is not reused", script: [ok(header("Expires", "{now-3600}"))], steps: notReused()),
            ConformanceCase(
                section: "5.3", name: "an invalid Expires means already expired", script: [ok(header("Expires", "0"))], steps: notReused()),
            ConformanceCase(
                section: "5.3", name: "an Expires with an extra space is not an HTTP-date, so already expired",
                script: [ok(header("Expires", "Thu,  01 Jan 2099 00:00:00 GMT"))], steps: notReused()),
            ConformanceCase(
                section: "5.1", name: "an Age list counts by its first member", script: [ok(cc("max-age=60"), header("Age", "120, 0"))],
                steps: notReused()),
            ConformanceCase(
                section: "5.3", name: "Expires equal to Date is already expired",
                script: [ok(header("Date", "{now}"), header("Expires", "{now}"))], steps: notReused()),
            ConformanceCase(
                section: "5.3", name: "two Expires lines are treated as expired",
                script: [ok(header("Expires", "{now+3600}"), header("Expires", "{now+7200}"))], steps: notReused()),
            ConformanceCase(
                section: "4.2.1", name: "conflicting max-age directives are treated as stale",
                script: [ok(cc("max-age=3600, max-age=10"), header("Age", "20"))], steps: notReused()),
            ConformanceCase(
                section: "5.2", name: "a quoted max-age value is accepted", script: [ok(cc("max-age=\"3600\""))], steps: storedAndHit()),
            ConformanceCase(
                section: "5.2", name: "directive names are case-insensitive", script: [ok(cc("MAX-AGE=3600"))], steps: storedAndHit()),
            ConformanceCase(
                section: "4.2.1", name: "a malformed max-age is treated as stale", script: [ok(cc("max-age=soon"))], steps: notReused()),
            ConformanceCase(
                section: "4.2.3", name: "an upstream Age past max-age makes it stale", script: [ok(cc("max-age=60"), header("Age", "120"))],
                steps: notReused()),
            ConformanceCase(
                section: "4.2.3", name: "an upstream Age below max-age counts in the hit's Age",
                script: [ok(cc("max-age=3600"), header("Age", "30"))],
                steps: [
                    get(origin: 1),
                    get(
                        origin: 1, hit: true,
                        check: { response in
                            (Int(response.header("age") ?? "") ?? -1) >= 30
                                ? nil : "Age \(response.header("age") ?? "none") below the upstream 30"
                        }),
                ]),
            ConformanceCase(
                section: "4.2.3", name: "a Date in the past adds apparent age",
                script: [ok(cc("max-age=60"), header("Date", "{now-120}"))], steps: notReused()),
            ConformanceCase(
                section: "4.2.3", name: "a Date in the future does not make the age negative",
                script: [ok(cc("max-age=60"), header("Date", "{now+1000}"))],
                steps: [
                    get(origin: 1),
                    get(origin: 1, hit: true, check: { ($0.header("age") ?? "") == "0" ? nil : "Age \($0.header("age") ?? "none")" }),
                ]),
            ConformanceCase(
                section: "4.2.2", name: "heuristic freshness from Last-Modified makes a hit",
                script: [ok(header("Last-Modified", "{now-100000}"))], steps: storedAndHit()),
            ConformanceCase(
                section: "4.2.2", name: "no lifetime and no validator: not reused", script: [ok()], steps: notReused()),
            ConformanceCase(
                section: "4.2.2", name: "explicit max-age=0 turns off the heuristic; Last-Modified is used to validate",
                script: [ok(cc("max-age=0"), header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"))], conditional: true,
                steps: [
                    get(origin: 1),
                    get(
                        origin: 2, hit: false, fwd: "stale", body: "v1", sent: [("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")],
                        fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "5.2.2.4", name: "no-cache responses are validated before every reuse",
                script: [ok(cc("no-cache, max-age=3600"), etagV1)], conditional: true,
                steps: [
                    get(origin: 1),
                    get(origin: 2, hit: false, body: "v1", sent: [("If-None-Match", "\"v1\"")], fwdStatus: 304),
                    get(origin: 3, hit: false, body: "v1", fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "5.2.2.4", name: "no-cache without a validator is fetched every time",
                script: [ok(cc("no-cache, max-age=3600"))], steps: notReused()),
            ConformanceCase(
                section: "5.2.2.2", name: "must-revalidate is validated even when the client accepts stale",
                script: [staleOnArrival(etagV1, cc("must-revalidate"))], conditional: true,
                steps: [get(origin: 1), get(cc("max-stale=100000"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.2.8", name: "proxy-revalidate binds a shared cache like must-revalidate",
                script: [staleOnArrival(etagV1, cc("proxy-revalidate"))], conditional: true,
                steps: [get(origin: 1), get(cc("max-stale=100000"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.2.10", name: "s-maxage implies proxy-revalidate",
                script: [ok(cc("s-maxage=10"), header("Age", "100"), etagV1)], conditional: true,
                steps: [get(origin: 1), get(cc("max-stale=100000"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "4.2.4", name: "without must-revalidate, max-stale serves a stale copy",
                script: [staleOnArrival()], steps: [get(origin: 1), get(cc("max-stale=100000"), origin: 1, hit: true, detail: "stale")]),
            ConformanceCase(
                section: "5.2.2", name: "immutable does not change freshness", script: [ok(cc("max-age=3600, immutable"))],
                steps: storedAndHit()),
            ConformanceCase(
                section: "4.2", name: "an hour-fresh response says so in Cache-Status ttl", script: [ok(maxAgeHour)],
                steps: [
                    get(origin: 1),
                    get(
                        origin: 1, hit: true,
                        check: { response in
                            let ttl = CacheStatusField(response.header("cache-status"))?.ttl ?? -1
                            return (3590...3600).contains(ttl) ? nil : "ttl \(ttl)"
                        }),
                ]),
        ]
    }
}

/// RFC 9111 §5.2.1 and §5.4: request directives.
enum RequestDirectiveCases {
    static var all: [ConformanceCase] {
        let validated = [ok(maxAgeHour, etagV1)]
        return [
            ConformanceCase(
                section: "5.2.1.4", name: "request no-cache validates the stored response", script: validated, conditional: true,
                steps: [
                    get(origin: 1),
                    get(
                        cc("no-cache"), origin: 2, hit: false, fwd: "request", body: "v1", sent: [("If-None-Match", "\"v1\"")],
                        fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "5.2.1.4", name: "request no-cache without a validator fetches again and stores",
                script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(cc("no-cache"), origin: 2, hit: false, fwd: "request"), get(origin: 2, hit: true)]),
            ConformanceCase(
                section: "5.4", name: "Pragma: no-cache without Cache-Control acts as no-cache", script: validated, conditional: true,
                steps: [get(origin: 1), get(header("Pragma", "no-cache"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.4", name: "Pragma is ignored when Cache-Control is present", script: validated,
                steps: [get(origin: 1), get(header("Pragma", "no-cache"), cc("max-age=3600"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.1", name: "request max-age=0 validates", script: validated, conditional: true,
                steps: [get(origin: 1), get(cc("max-age=0"), origin: 2, hit: false, sent: [("If-None-Match", "\"v1\"")], fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.1.1", name: "request max-age above the age is a hit", script: validated,
                steps: [get(origin: 1), get(cc("max-age=600"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.1", name: "request max-age below the age validates",
                script: [ok(maxAgeHour, header("Age", "100"), etagV1)], conditional: true,
                steps: [get(origin: 1), get(cc("max-age=50"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.1.1", name: "request max-age=0 without a validator fetches again", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(cc("max-age=0"), origin: 2, hit: false)]),
            ConformanceCase(
                section: "5.2.1.3", name: "min-fresh beyond the remaining lifetime validates",
                script: [ok(cc("max-age=100"), etagV1)], conditional: true,
                steps: [get(origin: 1), get(cc("min-fresh=500"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.1.3", name: "min-fresh within the remaining lifetime is a hit", script: [ok(cc("max-age=100"), etagV1)],
                steps: [get(origin: 1), get(cc("min-fresh=10"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.2", name: "max-stale without a value accepts any staleness", script: [staleOnArrival()],
                steps: [get(origin: 1), get(cc("max-stale"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.2", name: "max-stale above the staleness is a hit", script: [staleOnArrival()],
                steps: [get(origin: 1), get(cc("max-stale=1000"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.2", name: "max-stale below the staleness goes to the origin", script: [staleOnArrival()],
                steps: [get(origin: 1), get(cc("max-stale=10"), origin: 2, hit: false)]),
            ConformanceCase(
                section: "5.2.1.7", name: "only-if-cached with a fresh copy is a hit", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(cc("only-if-cached"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1.7", name: "only-if-cached with nothing stored is 504", script: [ok(maxAgeHour)],
                steps: [get(cc("only-if-cached"), status: 504, origin: 0)]),
            ConformanceCase(
                section: "5.2.1.7", name: "only-if-cached with a stale copy is 504", script: [staleOnArrival()],
                steps: [get(origin: 1), get(cc("only-if-cached"), status: 504, origin: 1)]),
            ConformanceCase(
                section: "5.2.1.7", name: "only-if-cached with max-stale accepts a stale copy", script: [staleOnArrival()],
                steps: [get(origin: 1), get(cc("only-if-cached, max-stale"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1", name: "request directive names are case-insensitive", script: validated, conditional: true,
                steps: [get(origin: 1), get(cc("NO-CACHE"), origin: 2, hit: false, fwdStatus: 304)]),
            ConformanceCase(
                section: "5.2.1", name: "an unknown request directive is ignored", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(cc("x-unknown=1"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.1", name: "request Cache-Control is forwarded to the origin", script: [ok(maxAgeHour)],
                steps: [get(cc("no-cache"), origin: 1, sent: [("Cache-Control", "no-cache")])]),
        ]
    }
}

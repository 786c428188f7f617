/// RFC 9111 §4.1: selecting a stored variant by the request headers named in Vary.
enum VaryCases {
    static var all: [ConformanceCase] {
        let varyAE = [ok(maxAgeHour, header("Vary", "Accept-Encoding"))]
        let large = String(repeating: "b", count: 5000)
        return [
            ConformanceCase(
                // Review 114 (finding 8 of review 113): B, too large for memory, is kept on disk
                // only; A, older, in memory too, must not answer the requests both match.
                section: "4.1", name: "of two variants a request matches, the more recent answers, though only on disk",
                script: [
                    ok(maxAgeHour, header("Vary", "X-Other"), body: "small-A"), ok(maxAgeHour, header("Vary", "X-Var"), body: large),
                ],
                steps: [
                    get(header("X-Other", "a"), origin: 1, body: "small-A"),
                    get(header("X-Var", "b"), origin: 2, body: large),
                    get(header("X-Other", "a"), header("X-Var", "b"), origin: 2, hit: true, body: large),
                ], config: "[memory]\nmax_object_bytes = \"1000B\"\n"),
            ConformanceCase(
                section: "4.1", name: "the same Vary value is a hit", script: varyAE,
                steps: storedAndHit(header("Accept-Encoding", "gzip"))),
            ConformanceCase(
                section: "4.1", name: "another Vary value is a miss; both variants are then kept", script: varyAE,
                steps: [
                    get(header("Accept-Encoding", "gzip"), origin: 1, hit: false),
                    get(header("Accept-Encoding", "br"), origin: 2, hit: false, fwd: "vary-miss"),
                    get(header("Accept-Encoding", "gzip"), origin: 2, hit: true),
                    get(header("Accept-Encoding", "br"), origin: 2, hit: true),
                ]),
            ConformanceCase(
                section: "4.1", name: "absent in both requests is a match", script: varyAE, steps: storedAndHit()),
            ConformanceCase(
                section: "4.1", name: "absent then present is not a match", script: varyAE,
                steps: [get(origin: 1), get(header("Accept-Encoding", "gzip"), origin: 2, hit: false)]),
            ConformanceCase(
                section: "4.1", name: "list order does not matter for Accept-Encoding", script: varyAE,
                steps: [
                    get(header("Accept-Encoding", "gzip, br"), origin: 1), get(header("Accept-Encoding", "br,gzip"), origin: 1, hit: true),
                ]),
            ConformanceCase(
                section: "4.1", name: "whitespace around list elements does not matter", script: varyAE,
                steps: [
                    get(header("Accept-Encoding", "gzip,br"), origin: 1),
                    get(header("Accept-Encoding", "gzip ,   br"), origin: 1, hit: true),
                ]),
            ConformanceCase(
                section: "4.1", name: "several line values combine like one", script: varyAE,
                steps: [
                    get(header("Accept-Encoding", "gzip, br"), origin: 1),
                    get(header("Accept-Encoding", "gzip"), header("Accept-Encoding", "br"), origin: 1, hit: true),
                ]),
            ConformanceCase(
                section: "4.1", name: "every field Vary names must match",
                script: [ok(maxAgeHour, header("Vary", "Accept-Language, X-Mode"))],
                steps: [
                    get(header("Accept-Language", "en"), header("X-Mode", "a"), origin: 1),
                    get(header("Accept-Language", "en"), header("X-Mode", "a"), origin: 1, hit: true),
                    get(header("Accept-Language", "en"), header("X-Mode", "b"), origin: 2, hit: false),
                ]),
            ConformanceCase(
                section: "4.1", name: "Vary field names are case-insensitive", script: [ok(maxAgeHour, header("Vary", "accept-language"))],
                steps: storedAndHit(header("Accept-Language", "fr"))),
            ConformanceCase(
                section: "4.1", name: "several Vary lines all count",
                script: [ok(maxAgeHour, header("Vary", "X-A"), header("Vary", "X-B"))],
                steps: [
                    get(header("X-A", "1"), header("X-B", "1"), origin: 1),
                    get(header("X-A", "1"), header("X-B", "2"), origin: 2, hit: false),
                ]),
            ConformanceCase(
                section: "4.1", name: "values of other fields are compared exactly",
                script: [ok(maxAgeHour, header("Vary", "X-Mode"))],
                steps: [get(header("X-Mode", "a"), origin: 1), get(header("X-Mode", "A"), origin: 2, hit: false)]),
            ConformanceCase(
                section: "4.1", name: "Vary: * never matches", script: [ok(maxAgeHour, header("Vary", "*"))],
                steps: [get(origin: 1), get(origin: 2), get(origin: 3)]),
        ]
    }
}

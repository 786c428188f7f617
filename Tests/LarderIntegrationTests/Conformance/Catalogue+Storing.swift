/// RFC 9111 §3: which responses a shared cache stores.
enum StoringCases {
    static let heuristicStatuses = [203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    static var all: [ConformanceCase] {
        var cases: [ConformanceCase] = [
            ConformanceCase(section: "3", name: "a 200 to GET with max-age is stored", script: [ok(maxAgeHour)], steps: storedAndHit()),
            ConformanceCase(
                section: "3", name: "a response to POST is not stored", script: [ok(maxAgeHour)],
                steps: [get(fwd: "method", method: "POST"), get(origin: 2, hit: false)]),
            ConformanceCase(
                section: "3", name: "a response to PUT is not stored", script: [ok(maxAgeHour)],
                steps: [get(method: "PUT"), get(origin: 2, hit: false)]),
            ConformanceCase(
                section: "3", name: "OPTIONS is not cached", script: [ok(maxAgeHour)],
                steps: [get(origin: 1, method: "OPTIONS"), get(origin: 2, method: "OPTIONS")]),
            ConformanceCase(
                section: "3", name: "HEAD on a miss is forwarded and not stored as a GET", script: [ok(maxAgeHour)],
                steps: [get(origin: 1, method: "HEAD"), get(origin: 2, hit: false)]),
            ConformanceCase(
                section: "5.2.2.5", name: "no-store is not stored", script: [ok(cc("no-store, max-age=3600"))], steps: notReused()),
            ConformanceCase(
                section: "5.2.2.7", name: "private is not stored by a shared cache", script: [ok(cc("private, max-age=3600"))],
                steps: notReused()),
            ConformanceCase(
                section: "5.2.2.7", name: "qualified private is not stored", script: [ok(cc("private=\"X-Secret\", max-age=3600"))],
                steps: notReused()),
            ConformanceCase(
                section: "5.2.1.5", name: "request no-store prevents storing", script: [ok(maxAgeHour)],
                steps: [get(cc("no-store"), origin: 1), get(origin: 2, hit: false)]),
            ConformanceCase(
                section: "5.2.1.5", name: "request no-store may still be answered from cache", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(cc("no-store"), origin: 1, hit: true)]),
            ConformanceCase(
                section: "3.5", name: "a response to Authorization is not stored by default", script: [ok(maxAgeHour)],
                steps: notReused(header("Authorization", "Bearer a"))),
            ConformanceCase(
                section: "3.5", name: "Authorization with public is stored", script: [ok(cc("public, max-age=3600"))],
                steps: storedAndHit(header("Authorization", "Bearer a"))),
            ConformanceCase(
                section: "3.5", name: "Authorization with s-maxage is stored", script: [ok(cc("s-maxage=3600"))],
                steps: storedAndHit(header("Authorization", "Bearer a"))),
            ConformanceCase(
                section: "3.5", name: "Authorization with must-revalidate is stored",
                script: [ok(cc("max-age=3600, must-revalidate"))], steps: storedAndHit(header("Authorization", "Bearer a"))),
            ConformanceCase(
                section: "3", name: "a response with Set-Cookie is not stored", script: [ok(maxAgeHour, header("Set-Cookie", "a=1"))],
                steps: notReused()),
            ConformanceCase(
                section: "4.1", name: "Vary: * is not stored", script: [ok(maxAgeHour, header("Vary", "*"))], steps: notReused()),
            ConformanceCase(
                section: "3", name: "a 206 is not stored (ranges are not combined)",
                script: [ok(maxAgeHour, header("Content-Range", "bytes 0-1/10"), body: "v1", status: 206)],
                steps: [get(status: 206, origin: 1), get(status: 206, origin: 2, hit: false)]),
            ConformanceCase(
                section: "3.3", name: "an incomplete response is not stored",
                script: [Scripted(status: 200, headers: [maxAgeHour], body: String(repeating: "x", count: 1000), truncate: 100)],
                steps: [
                    get(origin: 1, check: { $0.body.count < 1000 ? nil : "the truncated body arrived whole" }),
                    get(origin: 2, check: { $0.body.count < 1000 ? nil : "served a stored truncated response" }),
                ]),
            ConformanceCase(
                section: "3", name: "a 302 without explicit freshness is not stored",
                script: [ok(header("Location", "/elsewhere"), header("Last-Modified", "{now-100000}"), status: 302)],
                steps: [get(status: 302, origin: 1), get(status: 302, origin: 2)]),
            ConformanceCase(
                section: "3", name: "a 307 without explicit freshness is not stored",
                script: [ok(header("Location", "/elsewhere"), status: 307)],
                steps: [get(status: 307, origin: 1), get(status: 307, origin: 2)]),
            ConformanceCase(
                section: "3", name: "a 302 with max-age is stored", script: [ok(maxAgeHour, header("Location", "/x"), status: 302)],
                steps: [get(status: 302, origin: 1), get(status: 302, origin: 1, hit: true)]),
            ConformanceCase(
                section: "3", name: "a 500 with explicit freshness is stored", script: [ok(maxAgeHour, status: 500)],
                steps: [get(status: 500, origin: 1), get(status: 500, origin: 1, hit: true)]),
            ConformanceCase(
                section: "5.2.2.3", name: "must-understand lets a known status ignore no-store",
                script: [ok(cc("must-understand, no-store, max-age=3600"))], steps: storedAndHit()),
            ConformanceCase(
                section: "5.2.2.3", name: "must-understand with an unknown status keeps no-store",
                script: [ok(cc("must-understand, no-store, max-age=3600"), status: 299)],
                steps: [get(status: 299, origin: 1), get(status: 299, origin: 2)]),
            ConformanceCase(
                section: "4.2.2", name: "public with Last-Modified is stored heuristically",
                script: [ok(cc("public"), header("Last-Modified", "{now-100000}"))], steps: storedAndHit()),
            ConformanceCase(
                section: "3", name: "a response with only an ETag is stored for revalidation",
                script: [ok(etagV1), ok(etagV1, maxAgeHour)], conditional: true,
                steps: [
                    get(origin: 1),
                    get(origin: 2, hit: false, fwd: "stale", body: "v1", sent: [("If-None-Match", "\"v1\"")], fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "3", name: "the stored response keeps end-to-end headers and drops hop-by-hop ones",
                script: [ok(maxAgeHour, header("X-Kept", "1"), header("Connection", "X-Hop"), header("X-Hop", "2"))],
                steps: [
                    get(origin: 1),
                    get(origin: 1, hit: true, expectHeaders: [("X-Kept", "1"), ("X-Hop", nil), ("Connection", nil)]),
                ]),
        ]
        for status in heuristicStatuses {
            cases.append(
                ConformanceCase(
                    section: "4.2.2", name: "a \(status) with Last-Modified is heuristically cacheable",
                    script: [ok(header("Last-Modified", "{now-100000}"), status: status)],
                    steps: [get(status: status, origin: 1, hit: false), get(status: status, origin: 1, hit: true)]))
        }
        // Field names compare case-insensitively (RFC 9110 §5.1): the fields that keep a
        // response out of a shared cache count however they are spelled, in the request or the
        // response, and a field the response's Connection names in another case is not kept.
        for name in ["authorization", "AUTHORIZATION", "aUtHoRiZaTiOn"] {
            cases.append(
                ConformanceCase(
                    section: "3.5", name: "a response to \(name) is not stored", script: [ok(maxAgeHour)],
                    steps: notReused(header(name, "Bearer a"))))
        }
        let privateResponses = [
            header("set-cookie", "a=1"), header("SET-COOKIE", "a=1"), header("cache-control", "PRIVATE, max-age=3600"),
            header("CACHE-CONTROL", "max-age=3600, No-Store"), header("vary", "*"), header("VARY", "*"),
        ]
        for field in privateResponses {
            let script = field.0.lowercased() == "cache-control" ? [ok(field)] : [ok(maxAgeHour, field)]
            cases.append(
                ConformanceCase(
                    section: "3", name: "a response with \(field.0): \(field.1) is not stored", script: script, steps: notReused()))
        }
        cases.append(
            ConformanceCase(
                section: "3", name: "a field Connection names in another case is not stored",
                script: [ok(maxAgeHour, header("CONNECTION", "x-HOP, SET-COOKIE"), header("X-Hop", "2"), header("set-cookie", "a=1"))],
                steps: [
                    get(origin: 1, expectHeaders: [("X-Hop", nil), ("Set-Cookie", nil)]),
                    get(origin: 1, hit: true, expectHeaders: [("X-Hop", nil), ("Set-Cookie", nil), ("Connection", nil)]),
                ]))
        return cases
    }
}

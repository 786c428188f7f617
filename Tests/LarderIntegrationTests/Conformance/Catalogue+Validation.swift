/// RFC 9111 §4.3 (validation) and RFC 9110 §13 (conditional requests answered by the cache).
enum ValidationCases {
    static var all: [ConformanceCase] {
        let staleETag = [staleOnArrival(etagV1)]
        let freshETag = [ok(maxAgeHour, etagV1, header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"))]
        return [
            ConformanceCase(
                section: "4.3.1", name: "a stale entry is validated with If-None-Match", script: staleETag, conditional: true,
                steps: [
                    get(origin: 1),
                    get(origin: 2, hit: false, fwd: "stale", body: "v1", sent: [("If-None-Match", "\"v1\"")], fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "4.3.1", name: "a stale entry with only Last-Modified is validated with If-Modified-Since",
                script: [staleOnArrival(header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"))], conditional: true,
                steps: [
                    get(origin: 1),
                    get(
                        origin: 2, body: "v1", sent: [("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"), ("If-None-Match", nil)],
                        fwdStatus: 304),
                ]),
            ConformanceCase(
                section: "4.3.1", name: "both validators are sent when both are stored",
                script: [staleOnArrival(etagV1, header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"))], conditional: true,
                steps: [
                    get(origin: 1),
                    get(origin: 2, sent: [("If-None-Match", "\"v1\""), ("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                ]),
            ConformanceCase(
                section: "4.3.4", name: "a 304 updates the stored header fields",
                script: [staleOnArrival(etagV1, header("X-Version", "1")), ok(etagV1, maxAgeHour, header("X-Version", "2"))],
                conditional: true,
                steps: [
                    get(origin: 1, expectHeaders: [("X-Version", "1")]),
                    get(origin: 2, body: "v1", expectHeaders: [("X-Version", "2")], fwdStatus: 304),
                    get(origin: 2, hit: true, body: "v1", expectHeaders: [("X-Version", "2")]),
                ]),
            ConformanceCase(
                // A 304 whose strong ETag is not the stored response's selects nothing to update:
                // the stored v1 must not take v2's validator, and the client gets v2 itself.
                section: "4.3.4", name: "a 304 with another strong ETag updates nothing; the object is fetched whole",
                script: [
                    staleOnArrival(etagV1, header("X-Version", "1")),
                    ok(maxAgeHour, header("ETag", "\"v2\""), header("X-Version", "2"), status: 304),
                    ok(maxAgeHour, header("ETag", "\"v2\""), header("X-Version", "2"), body: "v2"),
                ],
                steps: [
                    get(origin: 1, body: "v1"),
                    get(
                        origin: 3, body: "v2", expectHeaders: [("ETag", "\"v2\""), ("X-Version", "2")],
                        sent: [("If-None-Match", nil)]),
                    get(origin: 3, hit: true, body: "v2", expectHeaders: [("ETag", "\"v2\"")]),
                ]),
            ConformanceCase(
                section: "4.3.4", name: "a 304 with a weak ETag of the same tag still freshens the entry",
                script: [staleOnArrival(etagV1), ok(maxAgeHour, header("ETag", "W/\"v1\""), status: 304)],
                steps: [get(origin: 1), get(origin: 2, body: "v1", fwdStatus: 304), get(origin: 2, hit: true, body: "v1")]),
            ConformanceCase(
                // nginx weakens the tag of what it gzips, and answers the validation with the
                // strong one: the same representation, compared weakly.
                section: "4.3.4", name: "a 304 with the strong form of the stored weak ETag freshens the entry",
                script: [staleOnArrival(header("ETag", "W/\"x\"")), ok(maxAgeHour, header("ETag", "\"x\""), status: 304)],
                steps: [
                    get(origin: 1), get(origin: 2, body: "v1", fwdStatus: 304),
                    // The stored tag stays weak: it names the stored bytes (If-Range must not match).
                    get(origin: 2, hit: true, body: "v1", expectHeaders: [("ETag", "W/\"x\"")]),
                ]),
            ConformanceCase(
                // Two ETag fields, one the stored response's: each must name it (review 114).
                section: "4.3.4", name: "a 304 with two ETags, one of them another, updates nothing",
                script: [
                    staleOnArrival(etagV1), ok(maxAgeHour, etagV1, header("ETag", "\"v2\""), status: 304),
                    ok(maxAgeHour, header("ETag", "\"v2\""), body: "v2"),
                ],
                steps: [get(origin: 1, body: "v1"), get(origin: 3, body: "v2"), get(origin: 3, hit: true, body: "v2")]),
            ConformanceCase(
                section: "4.3.4", name: "a 304 with another weak ETag updates nothing; the object is fetched whole",
                script: [
                    staleOnArrival(etagV1), ok(maxAgeHour, header("ETag", "W/\"other\""), status: 304),
                    ok(maxAgeHour, header("ETag", "W/\"other\""), body: "v2"),
                ],
                steps: [
                    get(origin: 1, body: "v1"), get(origin: 3, body: "v2", expectHeaders: [("ETag", "W/\"other\"")]),
                    get(origin: 3, hit: true, body: "v2"),
                ]),
            ConformanceCase(
                // The entry stays until the refetch's answer replaces it: an error then leaves it
                // for stale-if-error (RFC 5861 §4), for this request and the next.
                section: "4.3.4", name: "after a 304 that updates nothing, an error leaves the entry for stale-if-error",
                script: [
                    staleOnArrival(etagV1, cc("stale-if-error=600")), ok(header("ETag", "\"v2\""), status: 304),
                    ok(body: "down", status: 503),
                ],
                steps: [get(origin: 1, body: "v1"), get(body: "v1", originAtLeast: 3), get(body: "v1", originAtLeast: 4)]),
            ConformanceCase(
                section: "4.3.4", name: "a 304 with a new lifetime freshens the entry",
                script: [staleOnArrival(etagV1), ok(etagV1, maxAgeHour)], conditional: true,
                steps: [get(origin: 1), get(origin: 2, fwdStatus: 304), get(origin: 2, hit: true), get(origin: 2, hit: true)]),
            ConformanceCase(
                section: "4.3.3", name: "a 200 to a validation replaces the stored response",
                script: [staleOnArrival(etagV1, body: "v1"), ok(maxAgeHour, header("ETag", "\"v2\""), body: "v2")], conditional: true,
                steps: [get(origin: 1, body: "v1"), get(origin: 2, body: "v2"), get(origin: 2, hit: true, body: "v2")]),
            ConformanceCase(
                section: "4.3.3", name: "a no-store 200 to a validation removes the old response",
                script: [staleOnArrival(etagV1, body: "v1"), ok(cc("no-store"), body: "v2")], conditional: true,
                steps: [get(origin: 1), get(origin: 2, body: "v2"), get(origin: 3, hit: false, body: "v2")]),
            ConformanceCase(
                section: "13.1.2", name: "a matching If-None-Match is answered 304 from cache", script: freshETag,
                steps: [
                    get(origin: 1),
                    get(
                        header("If-None-Match", "\"v1\""), status: 304, origin: 1, hit: true,
                        expectHeaders: [("ETag", "\"v1\""), ("Cache-Control", "max-age=3600")]),
                ]),
            ConformanceCase(
                section: "13.1.2", name: "If-None-Match uses weak comparison", script: freshETag,
                steps: [get(origin: 1), get(header("If-None-Match", "W/\"v1\""), status: 304, origin: 1)]),
            ConformanceCase(
                section: "13.1.2", name: "If-None-Match with a list matches any member", script: freshETag,
                steps: [get(origin: 1), get(header("If-None-Match", "\"a\", \"v1\", \"b\""), status: 304, origin: 1)]),
            ConformanceCase(
                section: "13.1.2", name: "a non-matching If-None-Match gets the full response", script: freshETag,
                steps: [get(origin: 1), get(header("If-None-Match", "\"other\""), status: 200, origin: 1, hit: true, body: "v1")]),
            ConformanceCase(
                section: "13.1.2", name: "If-None-Match: * matches any stored response", script: freshETag,
                steps: [get(origin: 1), get(header("If-None-Match", "*"), status: 304, origin: 1)]),
            ConformanceCase(
                section: "13.1.3", name: "If-Modified-Since not before Last-Modified gets 304", script: freshETag,
                steps: [get(origin: 1), get(header("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"), status: 304, origin: 1)]),
            ConformanceCase(
                section: "13.1.3", name: "If-Modified-Since before Last-Modified gets 200", script: freshETag,
                steps: [
                    get(origin: 1), get(header("If-Modified-Since", "Sat, 05 Nov 1994 08:49:37 GMT"), status: 200, origin: 1, body: "v1"),
                ]),
            ConformanceCase(
                section: "13.2.2", name: "If-None-Match takes precedence over If-Modified-Since", script: freshETag,
                steps: [
                    get(origin: 1),
                    get(
                        header("If-None-Match", "\"other\""), header("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"), status: 200,
                        origin: 1),
                ]),
            ConformanceCase(
                section: "13.1.3", name: "an invalid If-Modified-Since is ignored", script: freshETag,
                steps: [get(origin: 1), get(header("If-Modified-Since", "yesterday"), status: 200, origin: 1, hit: true)]),
            ConformanceCase(
                section: "4.3.2", name: "a conditional request on a miss goes to the origin as is", script: [ok(maxAgeHour, etagV1)],
                conditional: true,
                steps: [
                    get(header("If-None-Match", "\"v1\""), status: 304, origin: 1, sent: [("If-None-Match", "\"v1\"")]),
                    get(origin: 2, hit: false, body: "v1"),
                ]),
            ConformanceCase(
                section: "4.3.2", name: "a client's conditional on a stale entry is answered after Larder's own validation",
                script: staleETag, conditional: true,
                steps: [get(origin: 1), get(header("If-None-Match", "\"v1\""), status: 304, origin: 2)]),
            ConformanceCase(
                section: "13.1.1", name: "If-Match goes to the origin", script: [ok(maxAgeHour, etagV1)],
                steps: [get(origin: 1), get(header("If-Match", "\"v1\""), origin: 2, sent: [("If-Match", "\"v1\"")])]),
            ConformanceCase(
                section: "13.1.4", name: "If-Unmodified-Since goes to the origin", script: [ok(maxAgeHour, etagV1)],
                steps: [get(origin: 1), get(header("If-Unmodified-Since", "{now}"), origin: 2)]),
            ConformanceCase(
                section: "4.3.2", name: "a weak stored ETag is sent as is and can be confirmed",
                script: [staleOnArrival(header("ETag", "W/\"w1\""))], conditional: true,
                steps: [get(origin: 1), get(origin: 2, body: "v1", sent: [("If-None-Match", "W/\"w1\"")], fwdStatus: 304)]),
            ConformanceCase(
                section: "4.3.5", name: "HEAD on a stale entry is validated and answered without a body",
                script: staleETag, conditional: true,
                steps: [get(origin: 1), get(origin: 2, method: "HEAD", check: { $0.body.isEmpty ? nil : "HEAD got a body" })]),
            ConformanceCase(
                section: "4.3.5", name: "a matching HEAD response freshens the stored GET",
                script: [staleOnArrival(etagV1), ok(maxAgeHour, etagV1)],
                steps: [get(origin: 1), get(origin: 2, method: "HEAD"), get(origin: 2, hit: true, body: "v1")]),
            ConformanceCase(
                section: "4.3.5", name: "a HEAD response with another ETag makes the stored GET unusable",
                script: [
                    staleOnArrival(etagV1), ok(maxAgeHour, header("ETag", "\"v2\"")), ok(maxAgeHour, header("ETag", "\"v2\""), body: "v2"),
                ],
                steps: [get(origin: 1), get(origin: 2, method: "HEAD"), get(origin: 3, hit: false, body: "v2")]),
            ConformanceCase(
                section: "4.3.5", name: "a HEAD the client sends through updates the stored GET it matches, validators or not",
                script: [ok(maxAgeHour, header("X-Version", "1")), ok(maxAgeHour, header("X-Version", "2"))],
                steps: [
                    get(origin: 1, expectHeaders: [("X-Version", "1")]),
                    get(cc("no-cache"), origin: 2, expectHeaders: [("X-Version", "2")], method: "HEAD"),
                    get(origin: 2, hit: true, body: "v1", expectHeaders: [("X-Version", "2")]),
                ]),
            ConformanceCase(
                section: "4.3.5", name: "a HEAD response of another length makes the stored GET unusable",
                script: [ok(maxAgeHour, header("X-Version", "1")), ok(maxAgeHour, header("X-Version", "2"), body: "v22")],
                steps: [
                    get(origin: 1),
                    get(cc("no-cache"), origin: 2, method: "HEAD"),
                    get(origin: 3, hit: false, body: "v22", expectHeaders: [("X-Version", "2")]),
                ]),
            ConformanceCase(
                section: "4.3.1", name: "a fresh HEAD is answered from the stored GET", script: [ok(maxAgeHour)],
                steps: [
                    get(origin: 1),
                    get(
                        origin: 1, hit: true, expectHeaders: [("Content-Length", "2")], method: "HEAD",
                        check: { $0.body.isEmpty ? nil : "HEAD got a body" }),
                ]),
        ]
    }
}

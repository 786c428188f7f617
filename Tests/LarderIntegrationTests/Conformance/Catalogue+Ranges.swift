/// RFC 9110 §14: ranges served from stored responses.
enum RangeCases {
    static var all: [ConformanceCase] {
        let stored = [
            ok(maxAgeHour, header("ETag", "\"r1\""), header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"), body: "hello world")
        ]
        func ranged(_ name: String, _ range: String, status: Int, body: String?, contentRange: String?, extra: [(String, String)] = [])
            -> ConformanceCase
        {
            var headers = [header("Range", range)]
            headers += extra
            return ConformanceCase(
                section: "14", name: name, script: stored,
                steps: [
                    get(origin: 1),
                    Step(
                        headers: headers,
                        expect: Expectation(status: status, origin: 1, hit: true, body: body, headers: [("Content-Range", contentRange)])),
                ])
        }
        return [
            ranged("a byte range of a stored object is 206", "bytes=0-1", status: 206, body: "he", contentRange: "bytes 0-1/11"),
            ranged("a suffix range", "bytes=-3", status: 206, body: "rld", contentRange: "bytes 8-10/11"),
            ranged("an open-ended range", "bytes=6-", status: 206, body: "world", contentRange: "bytes 6-10/11"),
            ranged("a range past the end is clipped", "bytes=6-100", status: 206, body: "world", contentRange: "bytes 6-10/11"),
            ranged("a range starting past the end is 416", "bytes=100-200", status: 416, body: nil, contentRange: "bytes */11"),
            ranged("several ranges get the whole object", "bytes=0-1,3-4", status: 200, body: "hello world", contentRange: nil),
            ranged("an invalid range is ignored", "bytes=abc", status: 200, body: "hello world", contentRange: nil),
            ranged("a non-bytes unit is ignored", "items=0-1", status: 200, body: "hello world", contentRange: nil),
            ranged(
                "If-Range with the strong ETag gets the range", "bytes=0-1", status: 206, body: "he", contentRange: "bytes 0-1/11",
                extra: [header("If-Range", "\"r1\"")]),
            ranged(
                "If-Range with another ETag gets everything", "bytes=0-1", status: 200, body: "hello world", contentRange: nil,
                extra: [header("If-Range", "\"r0\"")]),
            ranged(
                "If-Range with a weak ETag never matches", "bytes=0-1", status: 200, body: "hello world", contentRange: nil,
                extra: [header("If-Range", "W/\"r1\"")]),
            ranged(
                "If-Range with the Last-Modified date gets the range", "bytes=0-1", status: 206, body: "he", contentRange: "bytes 0-1/11",
                extra: [header("If-Range", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            ConformanceCase(
                // cache.slice_size: a range miss asks for the slice holding it; this origin ignores
                // Range and answers whole, which is stored and the range cut from it.
                section: "14", name: "a range miss asks for its slice, answers the range, and stores the whole answer", script: stored,
                steps: [
                    Step(
                        headers: [header("Range", "bytes=0-4")],
                        expect: Expectation(
                            status: 206, origin: 1, body: "hello", headers: [("Content-Range", "bytes 0-4/11")],
                            sent: [("Range", "bytes=0-8388607")])),
                    get(origin: 1, hit: true, body: "hello world"),
                ]),
            ConformanceCase(
                section: "14", name: "slicing off: a range miss fetches the whole object, answers the range, and stores it",
                script: stored,
                steps: [
                    Step(
                        headers: [header("Range", "bytes=0-4")],
                        expect: Expectation(
                            status: 206, origin: 1, body: "hello", headers: [("Content-Range", "bytes 0-4/11")], sent: [("Range", nil)])),
                    get(origin: 1, hit: true, body: "hello world"),
                ],
                config: "[cache]\nslice_size = \"0\"\n"),
            ConformanceCase(
                section: "3.4", name: "a 206 holding the whole object is stored as the complete response",
                script: [
                    ok(maxAgeHour, header("ETag", "\"r1\""), header("Content-Range", "bytes 0-10/11"), body: "hello world", status: 206)
                ],
                steps: [
                    Step(
                        headers: [header("Range", "bytes=0-4")],
                        expect: Expectation(status: 206, origin: 1, body: "hello", headers: [("Content-Range", "bytes 0-4/11")])),
                    get(origin: 1, hit: true, body: "hello world"),
                ]),
            ConformanceCase(
                section: "14", name: "a range miss on an uncacheable object passes the range to the origin",
                script: [
                    ok(cc("no-store"), body: "hello world"),
                    ok(cc("no-store"), header("Content-Range", "bytes 0-1/11"), body: "he", status: 206),
                ],
                steps: [
                    Step(
                        headers: [header("Range", "bytes=0-1")],
                        expect: Expectation(status: 206, body: "he", sent: [("Range", "bytes=0-1")], originAtLeast: 2))
                ]),
            ConformanceCase(
                section: "14", name: "a range miss on an object over range_whole_max passes the range to the origin",
                script: [ok(maxAgeHour, body: "hello world"), ok(header("Content-Range", "bytes 0-1/11"), body: "he", status: 206)],
                steps: [
                    Step(
                        headers: [header("Range", "bytes=0-1")],
                        expect: Expectation(status: 206, body: "he", sent: [("Range", "bytes=0-1")], originAtLeast: 2))
                ],
                config: "[cache]\nrange_whole_max = \"5B\"\nslice_size = \"0\"\n"),
            ConformanceCase(
                section: "14", name: "HEAD with Range is answered without a body", script: stored,
                steps: [
                    get(origin: 1), get(header("Range", "bytes=0-1"), origin: 1, method: "HEAD", check: { $0.body.isEmpty ? nil : "body" }),
                ]),
        ]
    }
}

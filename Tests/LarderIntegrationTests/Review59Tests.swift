import Foundation
import Testing

extension IntegrationTests {
    /// Attacks on the first wave of issue 59: a client or an origin must not use a HEAD or a
    /// 304 to change what other clients get from the stored GET (run as conformance cases),
    /// a parent's answer to CONNECT must not desynchronize the client's connection, and an
    /// origin's answer to a slice request must not hold the event loop.
    @Suite(.timeLimit(.minutes(3))) struct Review59 {
        static let headCases: [ConformanceCase] = [
            ConformanceCase(
                section: "3.2", name: "a HEAD answered with Set-Cookie does not hand the cookie to later GETs",
                script: [
                    ok(maxAgeHour, header("X-Version", "1")),
                    ok(maxAgeHour, header("X-Version", "2"), header("Set-Cookie", "session=alice")),
                    ok(maxAgeHour, header("X-Version", "3")),
                ],
                steps: [
                    get(origin: 1),
                    get(cc("no-cache"), origin: 2, expectHeaders: [("Set-Cookie", "session=alice")], method: "HEAD"),
                    get(expectHeaders: [("Set-Cookie", nil)]),
                ]),
            ConformanceCase(
                section: "3.5", name: "a HEAD with Authorization does not update the shared stored GET",
                script: [
                    ok(maxAgeHour, header("X-Version", "1")), ok(maxAgeHour, header("X-User", "alice")),
                    ok(maxAgeHour, header("X-Version", "3")),
                ],
                steps: [
                    get(origin: 1),
                    get(header("Authorization", "Basic YWxpY2U6cw=="), cc("no-cache"), origin: 2, method: "HEAD"),
                    get(expectHeaders: [("X-User", nil)]),
                ]),
            ConformanceCase(
                section: "5.2.2.7", name: "a private HEAD answer does not update the shared stored GET",
                script: [
                    ok(maxAgeHour, header("X-Version", "1")), ok(cc("private, max-age=3600"), header("X-User", "alice")),
                    ok(maxAgeHour, header("X-Version", "3")),
                ],
                steps: [
                    get(origin: 1),
                    get(cc("no-cache"), origin: 2, method: "HEAD"),
                    get(expectHeaders: [("X-User", nil)]),
                ]),
            ConformanceCase(
                section: "4.1", name: "a HEAD for another variant does not update the stored one",
                script: [
                    ok(maxAgeHour, header("Vary", "Accept-Language"), header("X-Version", "1")),
                    ok(maxAgeHour, header("Vary", "Accept-Language"), header("X-Version", "2")),
                    ok(maxAgeHour, header("Vary", "Accept-Language"), header("X-Version", "3")),
                ],
                steps: [
                    get(header("Accept-Language", "en"), origin: 1),
                    get(header("Accept-Language", "fr"), cc("no-cache"), origin: 2, method: "HEAD"),
                    get(header("Accept-Language", "en"), expectHeaders: [("X-Version", "1")]),
                ]),
        ]

        static let mergeCases: [ConformanceCase] = [
            ConformanceCase(
                section: "4.3.4", name: "a 304 with Set-Cookie does not hand the cookie to later GETs",
                script: [staleOnArrival(etagV1), ok(etagV1, maxAgeHour, header("Set-Cookie", "session=alice"))], conditional: true,
                steps: [get(origin: 1), get(origin: 2, fwdStatus: 304), get(origin: 2, hit: true, expectHeaders: [("Set-Cookie", nil)])])
        ]

        @Test(arguments: mergeCases)
        func mergeDoesNotStoreACookie(_ testCase: ConformanceCase) throws {
            try Conformance().conforms(testCase)
        }

        @Test(arguments: headCases)
        func headDoesNotPoisonTheStoredGet(_ testCase: ConformanceCase) throws {
            try Conformance().conforms(testCase)
        }

        /// A parent proxy answering our CONNECT with a status that is no refusal (a 304, which
        /// has no body, or a redirect) is a bad gateway to the client: relayed with Larder's
        /// message as its body, a 304 would leave that message to be read as the next response.
        @Test func aParentsAnswerToConnectOtherThanAnErrorIsABadGateway() throws {
            let parent = try RawOrigin()
            let target = 443
            let larder = try Larder(config: "[upstream]\nparent = \"http://127.0.0.1:\(parent.port)\"\n")
            for (answer, expected) in [("304 Not Modified", 502), ("302 Found", 502), ("403 Forbidden", 403), ("503 Busy", 503)] {
                parent.script("127.0.0.1:\(target)", RawOrigin.Script("HTTP/1.1 \(answer)\r\nContent-Length: 0\r\n\r\n"))
                let (connection, response) = try Tunnels.connect(larder, to: target)
                _ = connection
                #expect(response.status == expected, "the parent answered \(answer)")
            }
        }

        /// An origin whose slice claims another, huge length (Content-Range takes up to 18
        /// digits) makes Larder drop the object's slices: only those that could be stored, not
        /// one purge per slice of the length claimed, which held the event loop for days.
        @Test func aChangedSliceClaimingAHugeLengthDoesNotHoldTheLoop() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n[cache]\nslice_size = \"64KiB\"\n")
            let slice = 64 << 10
            let length = 100_000
            func partial(_ range: ClosedRange<Int>, claiming total: String) -> Scripted {
                let body = Data(range.map { UInt8(truncatingIfNeeded: $0) })
                return Scripted(
                    status: 206,
                    headers: [
                        ("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound)/\(total)"), ("ETag", "\"s1\""),
                        ("Cache-Control", "max-age=3600"),
                    ], body: "", body64: body.base64EncodedString())
            }
            try origin.script(
                "/sliced",
                [partial(0...(slice - 1), claiming: "\(length)"), partial(slice...(length - 1), claiming: "999999999999999999")],
                conditional: false)
            let cut = try Curl.viaProxy(larder.proxy, ["-r", "0-\(length - 1)", origin.url("/sliced")], timeout: 10)
            #expect(cut.exitCode != 28, "the client hears its answer end (cut short): \(cut.stderr)")
            let next = try Curl.viaProxy(larder.proxy, [origin.url("/c0?cc=max-age=600&size=100")], timeout: 10)
            #expect(next.status == 200, "the loop answers the next request: \(next.stderr)")
        }

        /// An origin whose first slice claims a huge length, asked for by a client's open range:
        /// the answer's Cache-Status looks for the slices that could be stored, not for every
        /// slice of the length claimed, so the head goes out and the loop serves others.
        @Test func aFirstSliceClaimingAHugeLengthDoesNotHoldTheLoop() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n[cache]\nslice_size = \"64KiB\"\n")
            let slice = 64 << 10
            let body = Data((0..<slice).map { UInt8(truncatingIfNeeded: $0) })
            let huge = Scripted(
                status: 206,
                headers: [
                    ("Content-Range", "bytes 0-\(slice - 1)/999999999999999999"), ("ETag", "\"s1\""), ("Cache-Control", "max-age=3600"),
                ],
                body: "", body64: body.base64EncodedString())
            try origin.script("/huge", [huge], conditional: false)
            let open = try Curl.viaProxy(larder.proxy, ["-r", "0-", origin.url("/huge")], timeout: 3)
            #expect(open.status == 206, "the head went out: \(open.stderr)")
            let next = try Curl.viaProxy(larder.proxy, [origin.url("/c0?cc=max-age=600&size=100")], timeout: 10)
            #expect(next.status == 200, "the loop answers the next request: \(next.stderr)")
        }
    }
}

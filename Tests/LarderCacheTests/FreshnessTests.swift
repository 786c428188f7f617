import Foundation
import LarderHTTP
import Testing

@testable import LarderCache

@Suite(.timeLimit(.minutes(1))) struct FreshnessTests {
    private func lifetime(_ headers: HTTPHeaders, status: Int = 200, responseTime: Double = 1_000_000) -> Double {
        Freshness.lifetime(status: status, headers: headers, cacheControl: CacheControl(headers), responseTime: responseTime)
    }

    @Test func sMaxAgeWinsOverMaxAgeWhichWinsOverExpires() {
        #expect(lifetime(["Cache-Control": "max-age=10, s-maxage=20"]) == 20)
        #expect(lifetime(["Cache-Control": "max-age=10", "Expires": HTTPDate.format(1_000_100), "Date": HTTPDate.format(1_000_000)]) == 10)
        #expect(lifetime(["Expires": HTTPDate.format(1_000_100), "Date": HTTPDate.format(1_000_000)]) == 100)
    }

    @Test func invalidExpiresMeansAlreadyExpired() {
        #expect(lifetime(["Expires": "0"]) == 0)
        #expect(lifetime(["Expires": "tomorrow"]) == 0)
        // A date a day ahead, spelled with an extra space: not an HTTP-date, so already expired.
        let ahead = HTTPDate.format(1_086_400).replacingOccurrences(of: ", ", with: ",  ")
        #expect(lifetime(["Expires": ahead, "Date": HTTPDate.format(1_000_000)]) == 0)
    }

    /// RFC 9111 §5.1: the first member of a list counts; an invalid Age is ignored.
    @Test(
        arguments: [
            ("7200, 0", 7200), ("7200,0", 7200), (" 15 ", 15), ("-3", nil), ("1e3", nil), ("", nil),
            ("99999999999999", 1 << 31),
        ] as [(String, Int?)])
    func ageUsesTheFirstMember(_ value: String, _ expected: Int?) {
        #expect(Freshness.age(["Age": value]) == expected, "\(value)")
    }

    @Test func ageOfSeveralFieldLinesIsTheFirstLines() {
        #expect(Freshness.age(HTTPHeaders([("Age", "30"), ("Age", "0")])) == 30)
        let initial = Freshness.correctedInitialAge(headers: ["Age": "7200, 0"], requestTime: 1000, responseTime: 1000)
        #expect(initial == 7200)
    }

    @Test func heuristicIsATenthOfTheLastModifiedAgeCapped() {
        let date = 1_000_000
        #expect(lifetime(["Date": HTTPDate.format(date), "Last-Modified": HTTPDate.format(date - 1000)]) == 100)
        #expect(lifetime(["Date": HTTPDate.format(date), "Last-Modified": HTTPDate.format(date - 100_000_000)]) == Freshness.heuristicCap)
        // Not for statuses that are not heuristically cacheable.
        #expect(lifetime(["Date": HTTPDate.format(date), "Last-Modified": HTTPDate.format(date - 1000)], status: 302) == 0)
    }

    @Test func currentAgeFollowsSection4_2_3() {
        // Date 10 s before the response arrived, Age 5 from upstream, 2 s request delay.
        let headers: HTTPHeaders = ["Date": HTTPDate.format(990), "Age": "5"]
        let initial = Freshness.correctedInitialAge(headers: headers, requestTime: 998, responseTime: 1000)
        #expect(initial == 10)  // max(apparent 10, 5 + 2)
        let stored = Fixtures.response("/a", lifetime: 60, age: initial, responseTime: 1000)
        #expect(stored.currentAge(now: 1030) == 40)
        #expect(stored.isFresh(now: 1049))
        #expect(!stored.isFresh(now: 1050))
        let ages = Freshness.initialAges(headers: headers, requestTime: 998, responseTime: 1000.5)
        #expect(ages.corrected == 10.5 && ages.stated == 10, "stated: Date in whole seconds, no request delay")
        #expect(Freshness.initialAges(headers: ["Age": "5"], requestTime: 990, responseTime: 1000) == (15, 5))
    }
}

@Suite(.timeLimit(.minutes(1))) struct StorabilityTests {
    private func decide(
        _ response: HTTPHeaders, request: HTTPHeaders = [:], status: Int = 200, method: HTTPMethod = .get
    ) -> Storability.Decision {
        Storability.decide(method: method, requestHeaders: request, status: status, responseHeaders: response)
    }

    @Test func storesExplicitlyFreshResponses() {
        #expect(decide(["Cache-Control": "max-age=60"]) == .store)
        #expect(decide(["Expires": "Sun, 06 Nov 2094 08:49:37 GMT"]) == .store)
    }

    @Test func refusesNoStorePrivateAndPost() {
        #expect(!decide(["Cache-Control": "no-store, max-age=60"]).canStore)
        #expect(!decide(["Cache-Control": "private, max-age=60"]).canStore)
        #expect(!decide(["Cache-Control": "max-age=60"], method: .post).canStore)
        #expect(!decide(["Cache-Control": "max-age=60"], request: ["Cache-Control": "no-store"]).canStore)
    }

    @Test func authorizationNeedsPublicSMaxAgeOrMustRevalidate() {
        let authorized: HTTPHeaders = ["Authorization": "Bearer x"]
        #expect(!decide(["Cache-Control": "max-age=60"], request: authorized).canStore)
        #expect(decide(["Cache-Control": "public, max-age=60"], request: authorized).canStore)
        #expect(decide(["Cache-Control": "s-maxage=60"], request: authorized).canStore)
        #expect(decide(["Cache-Control": "max-age=60, must-revalidate"], request: authorized).canStore)
    }

    @Test func refusesPartialContentAndVaryStar() {
        #expect(!decide(["Cache-Control": "max-age=60"], status: 206).canStore)
        #expect(!decide(["Cache-Control": "max-age=60", "Vary": "*"]).canStore)
        #expect(!decide(["Cache-Control": "max-age=60", "Vary": "Accept-Encoding,  * "]).canStore)
        #expect(decide(["Cache-Control": "max-age=60", "Vary": "Accept-Encoding, X-*"]).canStore)
    }

    @Test func heuristicallyCacheableStatusesNeedNoExplicitLifetime() {
        #expect(decide([:], status: 404).canStore)
        #expect(!decide([:], status: 302).canStore)
        #expect(decide(["Cache-Control": "max-age=60"], status: 302).canStore)
    }
}

@Suite(.timeLimit(.minutes(1))) struct VaryMatcherTests {
    @Test func matchesOnNormalizedValues() {
        let stored = Fixtures.response(
            "/v", headers: ["Vary": "Accept-Encoding"],
            vary: VaryMatcher.values(for: ["Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip, br"]))
        #expect(VaryMatcher.matches(stored, request: ["Accept-Encoding": "br,gzip"]))
        #expect(VaryMatcher.matches(stored, request: HTTPHeaders([("Accept-Encoding", "gzip"), ("Accept-Encoding", "br")])))
        #expect(!VaryMatcher.matches(stored, request: ["Accept-Encoding": "gzip"]))
        #expect(!VaryMatcher.matches(stored, request: [:]))
    }

    /// Two variants one request may both match: they agree on every field both name.
    @Test func variantsOverlapWhenTheyAgreeOnTheFieldsTheyShare() {
        #expect(VaryMatcher.overlap([:], ["accept-encoding": "gzip"]), "none named: any request either matches")
        #expect(VaryMatcher.overlap(["x-a": "1"], ["x-b": "2"]))
        #expect(VaryMatcher.overlap(["accept-encoding": "gzip", "x-a": "1"], ["accept-encoding": "gzip"]))
        #expect(!VaryMatcher.overlap(["accept-encoding": "gzip"], ["accept-encoding": "br"]))
        #expect(VaryMatcher.overlap(["accept-encoding": "br"], ["accept-encoding": "br", "x-a": ""]))
        #expect(!VaryMatcher.overlap(["x-a": ""], ["x-a": "1", "x-b": "2"]), "absent is a value of its own")
    }

    @Test func absentHeaderMatchesOnlyAbsence() {
        let stored = Fixtures.response("/v", vary: VaryMatcher.values(for: ["Vary": "X-Mode"], request: [:]))
        #expect(VaryMatcher.matches(stored, request: [:]))
        #expect(!VaryMatcher.matches(stored, request: ["X-Mode": "a"]))
    }

    /// The values a variant is stored under (and kept on disk across versions) are worked out
    /// on bytes now, from Strings before (``VaryMatcher/normalize(name:_:)``, still the way for
    /// fields that are not ASCII): the same text for every request, ordered lists or not, and
    /// the same match. Seeded requests of one to three fields built from the pieces that
    /// matter (commas, semicolons, spaces, tabs, case, Latin-1 bytes).
    @Test func valuesWorkedOutOnBytesAreTheValuesOfBefore() {
        var state: UInt64 = 0x5eed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let pieces = [
            "gzip", "GZip", "br", "deflate", ",", ", ", " ,", ";", "; ", " ;", "q=0.5", "Q=1", " ", "\t", "", "*", "text/html", "\u{e9}",
            "a;;b", ";x",
        ]
        for round in 0..<20_000 {
            var fields: [(String, String)] = []
            for _ in 0..<(1 + next(3)) {
                let value = (0..<(1 + next(6))).map { _ in pieces[next(pieces.count)] }.joined()
                fields.append((next(4) == 0 ? "accept-ENCODING" : "Accept-Encoding", value))
                if next(3) == 0 { fields.append(("X-Mode", value)) }
            }
            let request = HTTPHeaders(fields)
            for name in ["accept-encoding", "x-mode"] {
                let before = VaryMatcher.normalize(name: name, request.values(name))
                #expect(VaryMatcher.normalize(name: name, in: request) == before, "round \(round): \(fields)")
                #expect(VaryMatcher.matches(vary: [name: before], request: request), "round \(round)")
                #expect(!VaryMatcher.matches(vary: [name: before + "x"], request: request), "round \(round)")
            }
        }
    }
}

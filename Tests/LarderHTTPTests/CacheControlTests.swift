import Glibc
import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct CacheControlTests {
    @Test func parsesDirectivesCaseInsensitivelyWithQuotedValues() {
        let directives = CacheControl(parsing: "Public, MAX-AGE=60, s-maxage=\"120\", no-cache=\"Set-Cookie, X\"")
        #expect(directives.isPublic)
        #expect(directives.maxAge == 60)
        #expect(directives.sMaxAge == 120)
        #expect(directives.noCache && directives.others.isEmpty)
    }

    @Test func conflictingOrMalformedDeltaSecondsReadAsZero() {
        #expect(CacheControl(parsing: "max-age=60, max-age=30").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=abc").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=60, max-age=60").maxAge == 60)
        #expect(CacheControl(parsing: "max-age=").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=\"\"").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=6a").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=-1").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=\"1\\2\"").maxAge == 12)
        #expect(CacheControl(parsing: "max-age=007").maxAge == 7)
        #expect(CacheControl(parsing: "x-age=5, max-age=9").deltaSeconds("x-age") == 5)
    }

    @Test func hugeDeltaSecondsAreCapped() {
        #expect(CacheControl(parsing: "max-age=99999999999999999999").maxAge == 2_147_483_648)
    }

    @Test func combinesEveryFieldLine() {
        let headers = HTTPHeaders([("Cache-Control", "no-store"), ("cache-control", "private")])
        let directives = CacheControl(headers)
        #expect(directives.noStore && directives.isPrivate)
    }

    @Test func otherNamesAreKeptLowerCasedWithTheirValuesAsGiven() {
        let parsed = CacheControl(parsing: "Max-Age=5, X-Custom=\"A b\", NO-STORE, community=\"UCI\", x-flag")
        #expect(parsed.others.map(\.name) == ["x-custom", "community", "x-flag"])
        #expect(parsed.others.map(\.value) == ["A b", "UCI", nil])
        #expect(parsed.has("no-store") && parsed.noStore && parsed.maxAge == 5 && parsed.has("Max-Age") && parsed.has("X-CUSTOM"))
        #expect(!parsed.has("private") && !parsed.has("x-other") && parsed.deltaSeconds("no-store") == nil)
    }

    @Test func bareMaxStaleMeansAnyStaleness() {
        #expect(CacheControl(parsing: "max-stale").maxStale == Int.max)
        #expect(CacheControl(parsing: "max-stale=5").maxStale == 5)
    }

    /// What the accessors answer, in one line: the delta-seconds directives with their values
    /// (`max-stale=any` for a bare one), then the flags, then the other directives as kept.
    private static func summary(_ parsed: CacheControl) -> String {
        var members: [String] = []
        let seconds: [(String, Int?)] = [
            ("max-age", parsed.maxAge), ("s-maxage", parsed.sMaxAge), ("min-fresh", parsed.minFresh), ("max-stale", parsed.maxStale),
            ("stale-while-revalidate", parsed.staleWhileRevalidate), ("stale-if-error", parsed.staleIfError),
        ]
        for (name, value) in seconds {
            if let value { members.append("\(name)=\(value == Int.max ? "any" : String(value))") }
        }
        let flags: [(String, Bool)] = [
            ("no-cache", parsed.noCache), ("no-store", parsed.noStore), ("public", parsed.isPublic), ("private", parsed.isPrivate),
            ("must-revalidate", parsed.mustRevalidate), ("proxy-revalidate", parsed.proxyRevalidate),
            ("must-understand", parsed.mustUnderstand), ("only-if-cached", parsed.onlyIfCached), ("immutable", parsed.immutable),
        ]
        for (name, set) in flags where set { members.append(name) }
        for other in parsed.others { members.append(other.value.map { "\(other.name)=\($0)" } ?? other.name) }
        return members.joined(separator: " ")
    }

    /// Each field value and what its directives read as: present or not, and a value as
    /// ``CacheControl/deltaSeconds(_:)`` reads it (conflicting, malformed, quoted, upper-case,
    /// bare, junk-dropped members included); `has` agrees with each accessor.
    @Test(arguments: [
        ("", ""), ("max-age=3600", "max-age=3600"), ("MAX-AGE=60, Public", "max-age=60 public"), ("no-cache", "no-cache"),
        ("no-cache=\"Set-Cookie\"", "no-cache"), ("no-store", "no-store"), ("no-store, must-understand", "no-store must-understand"),
        ("private", "private"), ("private=\"X\", public", "public private"),
        ("must-revalidate, proxy-revalidate", "must-revalidate proxy-revalidate"), ("s-maxage=10", "s-maxage=10"),
        ("s-maxage=x", "s-maxage=0"), ("immutable", "immutable"), ("only-if-cached", "only-if-cached"), ("min-fresh=5", "min-fresh=5"),
        ("max-stale", "max-stale=any"), ("max-stale=5", "max-stale=5"), ("max-stale=5, max-stale", "max-stale=any"),
        ("max-stale, max-stale=5", "max-stale=any"), ("stale-while-revalidate=30", "stale-while-revalidate=30"),
        ("stale-if-error=1, stale-if-error=2", "stale-if-error=0"), ("max-age=1 junk, no-store", "no-store"),
        ("x-custom=1, no-cache", "no-cache x-custom=1"), ("max-age=60, max-age=60", "max-age=60"), ("max-age", "max-age=0"),
        ("max-age=60, max-age=30, max-age=60", "max-age=0"), ("max-age=0, max-age=5", "max-age=0"), ("max-age=\"1\\2\"", "max-age=12"),
        ("max-age=\"60", ""), ("public=5, =5, no-store", "no-store public"), ("X-Q=\"a, b\", no-cache", "no-cache x-q=a, b"),
        (
            "max-age=1, s-maxage=2, min-fresh=3, max-stale=4, stale-while-revalidate=5, stale-if-error=6, public, private, no-cache, "
                + "no-store, must-revalidate, proxy-revalidate, must-understand, only-if-cached, immutable",
            "max-age=1 s-maxage=2 min-fresh=3 max-stale=4 stale-while-revalidate=5 stale-if-error=6 no-cache no-store public private "
                + "must-revalidate proxy-revalidate must-understand only-if-cached immutable"
        ),
        (
            "MAX-AGE=1, S-MaxAge=2, Min-Fresh=3, MAX-STALE, Stale-While-Revalidate=5, STALE-IF-ERROR=6, PUBLIC, Private, "
                + "No-Cache, NO-STORE, Must-Revalidate, PROXY-REVALIDATE, Must-Understand, Only-If-Cached, IMMUTABLE",
            "max-age=1 s-maxage=2 min-fresh=3 max-stale=any stale-while-revalidate=5 stale-if-error=6 no-cache no-store public private "
                + "must-revalidate proxy-revalidate must-understand only-if-cached immutable"
        ),
        (
            "max-agE=7, no-storx, publik, max-ages=1, stale-if-errors=2, no-cachee, privat, x=1",
            "max-age=7 no-storx publik max-ages=1 stale-if-errors=2 no-cachee privat x=1"
        ),
    ])
    func namedDirectivesReadAsTheFieldSaysThem(_ value: String, _ expected: String) {
        let parsed = CacheControl(parsing: value)
        #expect(Self.summary(parsed) == expected)
        #expect(parsed.noStore == parsed.has("no-store") && parsed.noCache == parsed.has("NO-CACHE"))
        #expect(parsed.isPrivate == parsed.has("private") && parsed.isPublic == parsed.has("public"))
        #expect(parsed.mustRevalidate == parsed.has("must-revalidate") && parsed.proxyRevalidate == parsed.has("proxy-revalidate"))
        #expect(parsed.mustUnderstand == parsed.has("must-understand") && parsed.onlyIfCached == parsed.has("only-if-cached"))
        #expect(parsed.immutable == parsed.has("immutable") && (parsed.maxStale != nil) == parsed.has("max-stale"))
        #expect(parsed.maxAge == parsed.deltaSeconds("max-age") && parsed.sMaxAge == parsed.deltaSeconds("S-MAXAGE"))
        #expect(parsed.minFresh == parsed.deltaSeconds("min-fresh") && parsed.staleIfError == parsed.deltaSeconds("stale-if-error"))
        #expect(parsed.staleWhileRevalidate == parsed.deltaSeconds("stale-while-revalidate"))
        #expect(parsed.isEmpty == expected.isEmpty)
        #expect(CacheControl(parsing: value) == parsed)
    }
}

@Suite(.timeLimit(.minutes(1))) struct HTTPDateTests {
    @Test func parsesAllThreeFormats() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(HTTPDate.parse("Wed Nov 16 08:49:37 1994") == 784_111_777 + 10 * 86_400)
    }

    /// RFC 9110 §5.6.7 spells each format with single spaces; anything else is not a date
    /// (and an Expires that is not one means already expired, RFC 9111 §5.3).
    @Test(arguments: [
        "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 06  Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37  GMT",
        "Sun, 06 Nov 1994 08:49:37", "Sun, 6 Nov 1994 08:49:37 GMT", "Sunday,  06-Nov-94 08:49:37 GMT",
        "Sunday, 6-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sun  Nov  6 08:49:37 1994", "Sun Nov   6 08:49:37 1994",
        "Sun, 06 nov 1994 08:49:37 GMT",
    ])
    func rejectsDatesSpelledLoosely(_ text: String) {
        #expect(HTTPDate.parse(text) == nil, "\(text)")
    }

    @Test func rejectsInvalidDates() {
        #expect(HTTPDate.parse("0") == nil)
        #expect(HTTPDate.parse("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
    }

    @Test func formatsIMFFixdate() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    /// The byte-level IMF-fixdate reader agrees with timegm (the general path) on every day
    /// from 1970 to 2199, at varying times of day, leap days and century years included.
    @Test func fixdateFastPathAgreesWithTimegm() {
        var seconds = 0
        while seconds < 7_258_118_400 {  // 2200-01-01
            let text = HTTPDate.format(seconds)
            #expect(HTTPDate.parse(text) == seconds, "\(text)")
            var parts = tm()
            var time = time_t(seconds)
            gmtime_r(&time, &parts)
            #expect(
                HTTPDate.daysFromCivil(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday)) == seconds
                    / 86_400)
            seconds += 86_400 + 3_607
        }
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 23:59:60 GMT") == 951_868_800)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
        #expect(HTTPDate.parse("Sun, 06 Xyz 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:4a:37 GMT") == nil)
    }
}

import Glibc
import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct CacheControlTests {
    @Test func parsesDirectivesCaseInsensitivelyWithQuotedValues() {
        let directives = CacheControl(parsing: "Public, MAX-AGE=60, s-maxage=\"120\", no-cache=\"Set-Cookie, X\"")
        #expect(directives.isPublic)
        #expect(directives.maxAge == 60)
        #expect(directives.sMaxAge == 120)
        #expect(directives.values("no-cache") == ["Set-Cookie, X"])
    }

    @Test func conflictingOrMalformedDeltaSecondsReadAsZero() {
        #expect(CacheControl(parsing: "max-age=60, max-age=30").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=abc").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=60, max-age=60").maxAge == 60)
    }

    @Test func hugeDeltaSecondsAreCapped() {
        #expect(CacheControl(parsing: "max-age=99999999999999999999").maxAge == 2_147_483_648)
    }

    @Test func combinesEveryFieldLine() {
        let headers = HTTPHeaders([("Cache-Control", "no-store"), ("cache-control", "private")])
        let directives = CacheControl(headers)
        #expect(directives.noStore && directives.isPrivate)
    }

    @Test func bareMaxStaleMeansAnyStaleness() {
        #expect(CacheControl(parsing: "max-stale").maxStale == Int.max)
        #expect(CacheControl(parsing: "max-stale=5").maxStale == 5)
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

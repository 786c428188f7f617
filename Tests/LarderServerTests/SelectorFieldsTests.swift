import LarderCache
import LarderHTTP
import Testing

@testable import LarderServer

/// The check a miss makes before the exact checks of the client's preconditions and Range:
/// it never misses a field those checks would find.
@Suite struct SelectorFieldsTests {
    @Test(arguments: [
        ("If-None-Match", true), ("if-modified-since", true), ("IF-MATCH", true), ("If-Unmodified-Since", true),
        ("If-Range", true), ("Range", true), ("range", true), ("Accept", false), ("User-Agent", false), ("Ranges", false),
        ("Referer", false), ("Iffy", false), ("X-If-Match", false),
    ])
    func aSelectorFieldIsAlwaysSeen(name: String, selects: Bool) {
        var headers: HTTPHeaders = ["Host": "origin.test", "Accept": "*/*"]
        headers.add(name, "x")
        let exact =
            Preconditions.hasOriginConditions(headers) || Preconditions.hasCacheableConditions(headers)
            || headers.contains("Range") || headers.contains("If-Range")
        #expect(exact == selects, "\(name)")
        #expect(ClientConnection.mayCarrySelectors(headers) == selects, "\(name)")
    }

    @Test func noFieldsNoSelectors() {
        #expect(!ClientConnection.mayCarrySelectors(HTTPHeaders()))
        #expect(!ClientConnection.mayCarrySelectors(["Host": "a", "Accept-Encoding": "gzip", "Cookie": "x=1"]))
    }
}

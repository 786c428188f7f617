import Testing

@testable import LarderServer

/// Fill keys are equal exactly when every part is, whether or not they share their storage:
/// the coalescer's tables and the registry find a fill by a key built again from the request.
@Suite struct FillKeyTests {
    @Test func keysBuiltApartFromTheSamePartsAreOneKey() {
        let first = FillKey(method: "GET", url: "http://o/a", bodyHash: nil)
        let second = FillKey(method: "GET", url: "http://o/a", bodyHash: nil)
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second, first]).count == 1)
    }

    @Test func everyPartTellsKeysApart() {
        let base = FillKey(method: "GET", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "gzip"])
        let others = [
            FillKey(method: "HEAD", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/b", bodyHash: 7, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 8, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: nil, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "br"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 7),
        ]
        for other in others { #expect(other != base) }
        #expect(Set(others + [base]).count == others.count + 1)
        let variant = FillKey(method: "GET", url: "http://o/a", bodyHash: 7).with(variant: ["accept-encoding": "gzip"])
        #expect(variant == base)
        #expect(variant.method == "GET" && variant.url == "http://o/a" && variant.bodyHash == 7)
    }
}

/// Age (RFC 9111 §5.1), Via (RFC 9110 §7.6.3) and Cache-Status (RFC 9211) on every response.
enum StatusCases {
    static var all: [ConformanceCase] {
        [
            ConformanceCase(
                section: "9211", name: "a stored miss says fwd=uri-miss and stored", script: [ok(maxAgeHour)],
                steps: [get(origin: 1, hit: false, fwd: "uri-miss", stored: true)]),
            ConformanceCase(
                section: "9211", name: "a miss that is not stored does not say stored", script: [ok(cc("no-store"))],
                steps: [get(origin: 1, hit: false, fwd: "uri-miss", stored: false)]),
            ConformanceCase(
                section: "9211", name: "a POST says fwd=method", script: [ok()], steps: [get(hit: false, fwd: "method", method: "POST")]),
            ConformanceCase(
                section: "5.1", name: "a hit carries Age", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(origin: 1, hit: true, check: { $0.header("age") != nil ? nil : "no Age" })]),
            ConformanceCase(
                section: "7.6.3", name: "Via is added to misses and hits", script: [ok(maxAgeHour)],
                steps: [
                    get(origin: 1, check: { ($0.header("via") ?? "").contains("1.1 larder") ? nil : "no Via" }),
                    get(origin: 1, hit: true, check: { ($0.header("via") ?? "").contains("1.1 larder") ? nil : "no Via" }),
                ]),
            ConformanceCase(
                section: "7.6.3", name: "an upstream Via is kept and Larder's added",
                script: [ok(maxAgeHour, header("Via", "1.1 upstream"))],
                steps: [
                    get(
                        origin: 1,
                        check: { response in
                            let vias = response.headers.filter { $0.0 == "via" }.map(\.1).joined(separator: ", ")
                            return vias.contains("1.1 upstream") && vias.contains("1.1 larder") ? nil : "Via: \(vias)"
                        })
                ]),
            ConformanceCase(
                section: "9211", name: "an upstream Cache-Status is kept and Larder's member comes after it",
                script: [ok(maxAgeHour, header("Cache-Status", "upstream; hit"))],
                steps: [
                    get(origin: 1),
                    get(
                        origin: 1, hit: true,
                        check: { response in
                            let members = response.headers.filter { $0.0 == "cache-status" }.map(\.1)
                            return members.first == "upstream; hit" && members.last?.hasPrefix("larder") == true
                                ? nil : "Cache-Status lines: \(members)"
                        }),
                ]),
            ConformanceCase(
                section: "7.6.1", name: "the request forwarded upstream carries Via", script: [ok()],
                steps: [get(origin: 1, sent: [("Via", "1.1 larder*")])]),
            ConformanceCase(
                section: "6.6.1", name: "Date is added when the origin sent none",
                script: [Scripted(headers: [maxAgeHour], noDate: true)],
                steps: [get(origin: 1, check: { $0.header("date") != nil ? nil : "no Date" })]),
        ]
    }
}

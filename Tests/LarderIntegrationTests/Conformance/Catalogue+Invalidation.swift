/// RFC 9111 §4.4: unsafe methods invalidate.
enum InvalidationCases {
    static var all: [ConformanceCase] {
        func invalidates(_ method: String, status: Int = 200, invalidated: Bool) -> ConformanceCase {
            ConformanceCase(
                section: "4.4", name: "a \(status) to \(method) \(invalidated ? "invalidates" : "does not invalidate") the stored GET",
                script: [ok(maxAgeHour, body: "v1"), ok(body: "changed", status: status), ok(maxAgeHour, body: "v2")],
                steps: [
                    get(origin: 1, body: "v1"),
                    get(status: status, origin: 2, method: method),
                    get(origin: invalidated ? 3 : 2, hit: !invalidated, body: invalidated ? "v2" : "v1"),
                ])
        }
        let other = [ok(maxAgeHour, body: "other")]
        return [
            invalidates("POST", invalidated: true),
            invalidates("PUT", status: 204, invalidated: true),
            invalidates("DELETE", invalidated: true),
            invalidates("PATCH", invalidated: true),
            invalidates("POST", status: 303, invalidated: true),
            invalidates("POST", status: 500, invalidated: false),
            invalidates("POST", status: 404, invalidated: false),
            ConformanceCase(
                section: "4.4", name: "a GET does not invalidate", script: [ok(maxAgeHour)],
                steps: [get(origin: 1), get(origin: 1, hit: true), get(origin: 1, hit: true)]),
            ConformanceCase(
                section: "4.4", name: "a same-origin Location is invalidated",
                script: [ok(header("Location", "/conformance-other"), status: 201)],
                steps: [
                    get(origin: 1, path: "-other"),
                    get(status: 201, method: "POST"),
                    get(origin: 2, hit: false, path: "-other"),
                ],
                others: ["-other": other]),
            ConformanceCase(
                section: "4.4", name: "a same-origin Content-Location is invalidated",
                script: [ok(header("Content-Location", "/conformance-other"))],
                steps: [
                    get(origin: 1, path: "-other"),
                    get(method: "PUT"),
                    get(origin: 2, hit: false, path: "-other"),
                ],
                others: ["-other": other]),
            ConformanceCase(
                section: "4.4", name: "a Location on another origin is not invalidated here",
                script: [ok(header("Location", "http://127.0.0.1:1/conformance-other"), status: 201)],
                steps: [
                    get(origin: 1, path: "-other"),
                    get(status: 201, method: "POST"),
                    get(origin: 1, hit: true, path: "-other"),
                ],
                others: ["-other": other]),
        ]
    }
}

import Foundation
import Testing

/// One scripted origin response.
struct Scripted: Sendable {
    var status = 200
    var headers: [(String, String)] = []
    var body = "v1"
    var delay = 0.0
    /// Close the connection without answering.
    var reset = false
    /// Send only this many body bytes (after announcing all of them), then close.
    var truncate: Int?
    /// Send no Date header.
    var noDate = false
    /// Binary content, base64 (sent in place of `body`).
    var body64: String?

    var json: [String: Any] {
        var object: [String: Any] = [
            "status": status, "headers": headers.map { [$0.0, $0.1] }, "body": body, "delay": delay, "reset": reset,
        ]
        if let truncate { object["truncate"] = truncate }
        if noDate { object["no_date"] = true }
        if let body64 { object["body64"] = body64 }
        return object
    }
}

/// What a step expects to see.
struct Expectation: Sendable {
    var status = 200
    /// Requests the origin has counted for the case's URL after this step.
    var origin: Int?
    /// Cache-Status says hit (true) or not (false).
    var hit: Bool?
    /// Cache-Status fwd value.
    var fwd: String?
    var fwdStatus: Int?
    var stored: Bool?
    var body: String?
    /// Response headers: nil value means "absent".
    var headers: [(String, String?)] = []
    /// Headers the origin saw on the last request it counted for this URL (nil: absent; a
    /// trailing `*` matches a prefix).
    var sent: [(String, String?)] = []
    /// Cache-Status detail.
    var detail: String?
    /// Requests the origin has counted for the URL, at least (background work may add more).
    var originAtLeast: Int?
    /// Any further check; returns a failure message or nil.
    var check: (@Sendable (RawConnection.Response) -> String?)?
}

/// A request a case sends, and what it expects.
struct Step: Sendable {
    var method = "GET"
    var headers: [(String, String)] = []
    /// Seconds to wait before sending.
    var wait = 0.0
    /// Sent to another URL of the same origin (path relative to the case's base).
    var path: String?
    var expect = Expectation()
}

/// A conformance case: a scripted resource and the requests that exercise it.
struct ConformanceCase: Sendable, CustomTestStringConvertible {
    let section: String
    let name: String
    var script: [Scripted]
    var conditional = false
    var steps: [Step]
    /// Other scripted resources, by path relative to the case's base.
    var others: [String: [Scripted]] = [:]
    /// Extra configuration for this case's Larder.
    var config = ""

    var testDescription: String { "§\(section) \(name)" }
}

// MARK: Builders that keep the catalogue short

func ok(_ headers: (String, String)..., body: String = "v1", status: Int = 200) -> Scripted {
    Scripted(status: status, headers: headers, body: body)
}

func get(
    _ headers: (String, String)..., status: Int = 200, origin: Int? = nil, hit: Bool? = nil, fwd: String? = nil,
    body: String? = nil, expectHeaders: [(String, String?)] = [], sent: [(String, String?)] = [], wait: Double = 0,
    method: String = "GET", fwdStatus: Int? = nil, stored: Bool? = nil, detail: String? = nil, path: String? = nil,
    originAtLeast: Int? = nil, check: (@Sendable (RawConnection.Response) -> String?)? = nil
) -> Step {
    Step(
        method: method, headers: headers, wait: wait, path: path,
        expect: Expectation(
            status: status, origin: origin, hit: hit, fwd: fwd, fwdStatus: fwdStatus, stored: stored, body: body,
            headers: expectHeaders, sent: sent, detail: detail, originAtLeast: originAtLeast, check: check))
}

/// A response already stale when it arrives: max-age=10 with Age: 100 (stale by 90 s).
func staleOnArrival(_ extra: (String, String)..., body: String = "v1") -> Scripted {
    Scripted(status: 200, headers: [("Cache-Control", "max-age=10"), ("Age", "100")] + extra, body: body)
}

let etagV1 = ("ETag", "\"v1\"")
let maxAgeHour = ("Cache-Control", "max-age=3600")
func cc(_ value: String) -> (String, String) { ("Cache-Control", value) }
func header(_ name: String, _ value: String) -> (String, String) { (name, value) }

/// A first request that must go to the origin and a second that must be a hit.
func storedAndHit(_ extra: (String, String)...) -> [Step] {
    [get(extra, origin: 1, hit: false), get(extra, origin: 1, hit: true)]
}

/// Two requests that must both reach the origin (nothing stored or reused).
func notReused(_ extra: (String, String)...) -> [Step] {
    [get(extra, origin: 1, hit: false), get(extra, origin: 2, hit: false)]
}

func get(
    _ headers: [(String, String)], status: Int = 200, origin: Int? = nil, hit: Bool? = nil, fwd: String? = nil,
    body: String? = nil
) -> Step {
    Step(headers: headers, expect: Expectation(status: status, origin: origin, hit: hit, fwd: fwd, body: body))
}

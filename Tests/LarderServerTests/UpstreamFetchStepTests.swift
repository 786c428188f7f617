import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream
import Testing

@testable import LarderServer

/// The fetch's pure step: each transfer callback, in each phase, against the action the fill
/// must carry out and the phase that follows; the clock, the jitter and the retry budget are
/// parameters.
@Suite struct UpstreamFetchStepTests {
    typealias Event = UpstreamFetch.Event
    typealias Action = UpstreamFetch.Action

    /// A delegate that is never called: the stand-in delivers nothing by itself.
    final class Silent: UpstreamTransferDelegate {
        func upstreamDidReceiveHead(_ head: consuming ResponseHead) {}
        func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool { true }
        func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk { .end }
        func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {}
    }

    /// What the test does: send an attempt, or report an event to the step.
    enum Input {
        case send
        case event(Event)
    }

    struct Row {
        let name: String
        var method = HTTPMethod.get
        var parents = 0
        var stale = false
        var canResend = true
        var budget = true
        let inputs: [Input]
        let action: Action
        var parentDown: Int? = nil
        let phase: UpstreamFetch.Phase
    }

    static let now = 1_000_000.0
    /// Linear 250 ms, no jitter, three attempts, on connect, timeout, reset and 5xx.
    static let policy: RetryPolicy = {
        var config = RetryConfig()
        config.strategy = .linear
        config.baseDelay = .milliseconds(250)
        config.jitter = .zero
        config.retryOn = [.connect, .timeout, .reset, .status5xx]
        return RetryPolicy(config)
    }()

    static func error(_ kind: UpstreamError.Kind, afterHead: Bool = false, reused: Bool = false) -> UpstreamError {
        UpstreamError(kind: kind, message: "\(kind)", afterHead: afterHead, reusedConnection: reused)
    }

    static func head(_ status: Int, retryAfter: String? = nil) -> Input { .event(.head(status: status, retryAfter: retryAfter)) }
    static func fail(_ kind: UpstreamError.Kind, afterHead: Bool = false, reused: Bool = false) -> Input {
        .event(.error(error(kind, afterHead: afterHead, reused: reused)))
    }

    static let rows: [Row] = [
        Row(name: "a 200 is the answer", inputs: [.send, head(200)], action: .accept(failure: nil), phase: .receivingBody),
        Row(name: "a 404 is the answer", inputs: [.send, head(404)], action: .accept(failure: nil), phase: .receivingBody),
        Row(
            name: "a 503 is retried after the policy's delay", inputs: [.send, head(503)],
            action: .retry(.status5xx, after: .milliseconds(250)), phase: .waitingToResend),
        Row(
            name: "a 503's Retry-After date, read against the clock, sets the delay",
            inputs: [.send, head(503, retryAfter: HTTPDate.format(Int(now) + 3))], action: .retry(.status5xx, after: .seconds(3)),
            phase: .waitingToResend),
        Row(
            name: "a 503 the budget refuses is a final failure", budget: false, inputs: [.send, head(503)],
            action: .accept(failure: .status5xx), phase: .receivingBody),
        Row(
            name: "a 503 that cannot be sent again is a final failure", canResend: false, inputs: [.send, head(503)],
            action: .accept(failure: .status5xx), phase: .receivingBody),
        Row(
            name: "a first 500, not retried, is not yet a failure", inputs: [.send, head(500)], action: .accept(failure: nil),
            phase: .receivingBody),
        Row(
            name: "a 429 not retried is a final failure", inputs: [.send, head(429)], action: .accept(failure: .status429),
            phase: .receivingBody),
        Row(
            name: "a 503 after the retries is a final failure",
            inputs: [.send, head(503), .send, head(503), .send, head(503), .send, head(503)], action: .accept(failure: .status5xx),
            phase: .receivingBody),
        Row(name: "bytes of the answer are taken", inputs: [.send, head(200), .event(.body)], action: .take, phase: .receivingBody),
        Row(name: "bytes before a head are not", inputs: [.send, .event(.body)], action: .ignore, phase: .awaitingHead),
        Row(name: "the end completes the answer", inputs: [.send, head(200), .event(.end)], action: .complete, phase: .ended),
        Row(name: "a head after the end is nothing", inputs: [.send, head(200), .event(.end), head(200)], action: .ignore, phase: .ended),
        Row(
            name: "a refused connection is retried", inputs: [.send, fail(.connect)],
            action: .retry(.connect, after: .milliseconds(250)), phase: .waitingToResend),
        Row(
            name: "a refused connection the budget refuses fails", budget: false, inputs: [.send, fail(.connect)],
            action: .fail(error(.connect)), phase: .ended),
        Row(
            name: "a POST is not sent again", method: .post, inputs: [.send, fail(.connect)], action: .fail(error(.connect)),
            phase: .ended),
        Row(
            name: "a timeout with no one left to answer fails", canResend: false, inputs: [.send, fail(.timeout)],
            action: .fail(error(.timeout)), phase: .ended),
        Row(name: "a name that does not resolve fails", inputs: [.send, fail(.dns)], action: .fail(error(.dns)), phase: .ended),
        Row(
            name: "a name that does not resolve, with a stale copy, answers stale", stale: true, inputs: [.send, fail(.dns)],
            action: .answerStale(.dns), phase: .ended),
        Row(
            name: "a refused destination never answers stale", stale: true, inputs: [.send, fail(.forbidden)],
            action: .fail(error(.forbidden)), phase: .ended),
        Row(
            name: "a body cut short fails, stale copy or not", stale: true,
            inputs: [.send, head(200), fail(.truncated, afterHead: true)], action: .fail(error(.truncated, afterHead: true)),
            phase: .ended),
        Row(
            name: "a dead pooled connection is replaced at once", inputs: [.send, fail(.reset, reused: true)],
            action: .resendOnFreshConnection, phase: .waitingToResend),
        Row(
            name: "a reset on a fresh connection is retried",
            inputs: [.send, fail(.reset, reused: true), .send, fail(.reset, reused: true)],
            action: .retry(.reset, after: .milliseconds(250)), phase: .waitingToResend),
        Row(
            name: "an unreachable parent is failed over and marked down", parents: 2, inputs: [.send, fail(.connect)],
            action: .failOver, parentDown: 0, phase: .waitingToResend),
        Row(
            name: "the last parent unreachable is retried and marked down", parents: 2,
            inputs: [.send, fail(.connect), .send, fail(.connect)], action: .retry(.connect, after: .milliseconds(250)),
            parentDown: 1, phase: .waitingToResend),
        Row(
            name: "a parent's name that does not resolve is marked down, and fails", parents: 1, inputs: [.send, fail(.dns)],
            action: .fail(error(.dns)), parentDown: 0, phase: .ended),
        Row(
            name: "a 304 that updates nothing is sent again without validators",
            inputs: [.send, head(304), .event(.validatorContradicted)],
            action: .resendUnconditionally, phase: .waitingToResend),
        Row(
            name: "a second 304 that updates nothing is the answer",
            inputs: [.send, head(304), .event(.validatorContradicted), .send, head(304), .event(.validatorContradicted)],
            action: .ignore, phase: .receivingBody),
        Row(
            name: "a 304 that updates nothing, of a request that cannot be sent again, is the answer", canResend: false,
            inputs: [.send, head(304), .event(.validatorContradicted)], action: .ignore, phase: .receivingBody),
        Row(
            name: "a contradicted validator before the head is nothing", inputs: [.send, .event(.validatorContradicted)],
            action: .ignore, phase: .awaitingHead),
    ]

    static let stale: StoredResponse = StoredResponse(
        key: CacheKey(url), status: 200, reason: "OK", headers: ["Cache-Control": "max-age=60"], body: .memory([1]),
        requestTime: now - 120, responseTime: now - 120, freshnessLifetime: 60, correctedInitialAge: 0)
    static let url = AbsoluteURL(scheme: "http", host: "origin.test", port: 80, pathAndQuery: "/")

    @Test(arguments: 0..<rows.count)
    func eachEventInEachPhase(_ index: Int) {
        let row = Self.rows[index]
        let parents = (0..<row.parents).map { ParentPlan.Parent(url: "http://parent\($0).test:3128") }
        var fetch = UpstreamFetch(
            request: UpstreamRequest(method: row.method, url: Self.url, headers: HTTPHeaders()), parents: parents,
            starter: FetchStandIn())
        let options = FillOptions()
        options.retry = Self.policy
        options.fallback = row.stale ? Self.stale : nil
        let settings = FillSettings(Config())
        let delegate = Silent()
        var last: UpstreamFetch.Step?
        for input in row.inputs {
            switch input {
            case .send:
                fetch.send(delegate: delegate)
            case .event(let event):
                last = fetch.step(
                    on: event, options: options, canResend: row.canResend, settings: settings, now: Self.now, random: 0,
                    spendRetry: { _ in row.budget })
            }
        }
        #expect(last?.action == row.action, "\(row.name)")
        #expect(last?.parentDown == row.parentDown.map { parents[$0] }, "\(row.name)")
        #expect(fetch.phase == row.phase, "\(row.name)")
    }

    /// The resend after a 304 that updates nothing carries neither of Larder's validators, and
    /// every other field as it was; it is not counted against the retry policy.
    @Test func theResendWithoutValidatorsKeepsTheOtherFields() {
        var headers = HTTPHeaders()
        headers.add("If-None-Match", "\"v1\"")
        headers.add("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")
        headers.add("X-Kept", "yes")
        var fetch = UpstreamFetch(
            request: UpstreamRequest(method: .get, url: Self.url, headers: headers), parents: [], starter: FetchStandIn())
        let options = FillOptions()
        options.retry = Self.policy
        let settings = FillSettings(Config())
        func step(_ event: Event) -> Action {
            fetch.step(
                on: event, options: options, canResend: true, settings: settings, now: Self.now, random: 0, spendRetry: { _ in true }
            ).action
        }
        fetch.send(delegate: Silent())
        #expect(step(.head(status: 304, retryAfter: nil)) == .accept(failure: nil))
        #expect(step(.validatorContradicted) == .resendUnconditionally)
        #expect(fetch.request.headers["If-None-Match"] == nil)
        #expect(fetch.request.headers["If-Modified-Since"] == nil)
        #expect(fetch.request.headers["X-Kept"] == "yes")
        #expect(fetch.freeAttempts == 1)
        #expect(fetch.validationRefused)
    }

    /// Failing over moves to the next parent and logs it; a retry logs its reason and delay.
    @Test func theRetryLogSaysWhyEachAttemptFollowed() {
        let parents = [ParentPlan.Parent(url: "http://a.test:3128"), ParentPlan.Parent(url: "http://b.test:3128")]
        var fetch = UpstreamFetch(
            request: UpstreamRequest(method: .get, url: Self.url, headers: HTTPHeaders()), parents: parents, starter: FetchStandIn())
        let options = FillOptions()
        options.retry = Self.policy
        let delegate = Silent()
        let settings = FillSettings(Config())
        for _ in 0..<2 {
            fetch.send(delegate: delegate)
            _ = fetch.step(
                on: .error(Self.error(.connect)), options: options, canResend: true, settings: settings, now: Self.now, random: 0,
                spendRetry: { _ in true })
        }
        #expect(fetch.retryLog.map { "\($0.reason):\($0.delayMillis)" } == ["parent:0", "connect:250"])
        #expect(fetch.attempts == 2)
        #expect(fetch.currentParent == parents[1])
        #expect(fetch.request.parentProxy == parents[1].url)
    }
}

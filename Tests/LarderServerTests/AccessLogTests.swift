import Dispatch
import Glibc
import LarderConfig
import LarderHTTP
import LarderIO
import Synchronization
import Testing

@testable import LarderServer

/// Access lines as written on a real loop into a pipe: the fields, what client text may not
/// do to a line, and lines far longer than usual.
@Suite(.timeLimit(.minutes(1))) struct AccessLogTests {
    /// The lines `record` writes for `entries` in `format`, without the timestamp where the
    /// format starts with one (checked for its shape instead).
    static func lines(_ format: LogConfig.AccessFormat, _ entries: [AccessLog.Entry]) throws -> [String] {
        // A file, not a pipe: the loop writes every line before the test reads any.
        var template = Array("/tmp/larder-access-log-XXXXXX".utf8CString)
        let writeEnd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        #expect(writeEnd >= 0)
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        let handle = try EventLoop.start(name: "access-log-test")
        defer { handle.execute { $0.stop() } }
        let done = DispatchSemaphore(value: 0)
        handle.execute { loop in
            let log = AccessLog(loop: loop, fd: writeEnd, enabled: true)
            log.format = format
            for entry in entries {
                log.record(
                    client: entry.client, method: entry.method, url: entry.target, status: entry.status, outcome: entry.outcome,
                    bytes: entry.bytes, durationNanos: entry.durationNanos, attempts: entry.attempts, retries: entry.retries,
                    tls: entry.tls, key: entry.key, user: entry.user, agent: entry.agent, detail: entry.detail)
            }
            log.flush()
            close(writeEnd)
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let readEnd = open(path, O_RDONLY)
        defer { close(readEnd) }
        var text: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(readEnd, &chunk, chunk.count)
            guard count > 0 else { break }
            text += chunk[0..<count]
        }
        return String(decoding: text, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast().map {
            guard format == .larder else { return String($0) }
            let stamp = $0.prefix(24)
            #expect(
                stamp.count == 24
                    && stamp.enumerated().allSatisfy { index, character in
                        switch index {
                        case 4, 7: character == "-"
                        case 10: character == "T"
                        case 13, 16: character == ":"
                        case 19: character == "."
                        case 23: character == "Z"
                        default: character.isASCII && character.isNumber
                        }
                    }, "\(stamp)")
            return String($0.dropFirst(24))
        }
    }

    static func entry(
        client: String? = "10.1.2.3:50000", url: AccessLog.Target = .text("http://example.test/a"), durationNanos: UInt64 = 1_234_567,
        retries: String? = nil, tls: String? = nil, key: String? = nil, user: String? = nil, agent: String? = nil
    ) -> AccessLog.Entry {
        AccessLog.Entry(
            client: client.flatMap(SocketAddress.init(parsing:)), method: "GET", target: url, status: 200, outcome: .request(.memoryHit),
            bytes: 1234,
            durationNanos: durationNanos, attempts: 1, retries: retries, tls: tls, key: key, user: user, agent: agent)
    }

    /// A line schedules the log's flush timer; the timer reaches the log without a weak
    /// reference, which would slow every later retain of the log (one a request).
    @Test func theFlushTimerTakesNoWeakReferenceToTheLog() throws {
        let handle = try EventLoop.start(name: "access-log-weak-test")
        defer { handle.execute { $0.stop() } }
        let weakReferences = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        handle.execute { loop in
            let log = AccessLog(loop: loop, fd: -1, enabled: true)
            let entry = Self.entry()
            log.record(
                client: entry.client, method: entry.method, url: entry.target, status: entry.status, outcome: entry.outcome,
                bytes: entry.bytes, durationNanos: entry.durationNanos, attempts: entry.attempts)
            // The runtime counts one weak reference for an object that has none.
            weakReferences.withLock { $0 = Int(_getWeakRetainCount(log)) }
            log.buffer.removeAll()
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(weakReferences.withLock { $0 } == 1)
    }

    @Test func larderLinesCarryEveryFieldAndClientTextCannotBreakThem() throws {
        let lines = try Self.lines(
            .larder,
            [
                Self.entry(),
                Self.entry(
                    client: "[::1]:50001", url: .text("http://example.test/a b\"c\u{1}d\u{7F}"), durationNanos: 1_005_000, retries: "1:502",
                    tls: "TLSv1.3", key: "k\"ey", user: "alice", agent: "curl \"x\"\\y\u{7}"),
                Self.entry(client: "10.1.2.3:50002", durationNanos: 999),
                Self.entry(client: nil, durationNanos: 12_000_000_000),
            ])
        #expect(
            lines == [
                " 10.1.2.3 \"GET http://example.test/a\" 200 hit 1234 1.234ms attempts=1",
                " ::1 \"GET http://example.test/a b'c'd'\" 200 hit 1234 1.005ms attempts=1 retries=1:502 tls=TLSv1.3"
                    + " key=\"k'ey\" user=\"alice\" ua=\"curl 'x''y'\"",
                " 10.1.2.3 \"GET http://example.test/a\" 200 hit 1234 0.000ms attempts=1",
                " - \"GET http://example.test/a\" 200 hit 1234 12000.000ms attempts=1",
            ])
    }

    /// A request's absolute URL is written from its parts: as its text would be, the port only
    /// when it is not the scheme's, sanitized the same way.
    @Test func anAbsoluteTargetIsWrittenAsItsText() throws {
        let urls = [
            AbsoluteURL(scheme: "http", host: "example.test", port: 80, pathAndQuery: "/a?b=1"),
            AbsoluteURL(scheme: "https", host: "[::1]", port: 8443, pathAndQuery: "/a b\"c\u{1}"),
            AbsoluteURL(scheme: "http", host: "example.test", port: 8080, pathAndQuery: "/" + String(repeating: "p", count: 20_000)),
        ]
        let absolute = try Self.lines(.larder, urls.map { Self.entry(url: .absolute($0)) })
        let text = try Self.lines(.larder, urls.map { Self.entry(url: .text($0.description)) })
        #expect(absolute == text)
        #expect(absolute.first == " 10.1.2.3 \"GET http://example.test/a?b=1\" 200 hit 1234 1.234ms attempts=1")
        #expect(absolute.dropFirst().first?.contains("\"GET https://[::1]:8443/a b'c'\" ") == true, "\(absolute)")
    }

    /// A target and a User-Agent of tens of kilobytes (the head limit allows them) are written
    /// whole, as one line.
    @Test func aLongTargetAndAgentAreWrittenWhole() throws {
        let path = String(repeating: "p", count: 40_000)
        let agent = String(repeating: "a", count: 30_000)
        let lines = try Self.lines(.larder, [Self.entry(url: .text("http://example.test/" + path), agent: agent), Self.entry()])
        #expect(lines.count == 2)
        #expect(lines.first == " 10.1.2.3 \"GET http://example.test/\(path)\" 200 hit 1234 1.234ms attempts=1 ua=\"\(agent)\"")
    }

    /// The other formats name an absolute target by its text, and the client as the default
    /// format does.
    @Test func squidAndJSONLinesNameAnAbsoluteTargetAndTheClient() throws {
        let url = AbsoluteURL(scheme: "http", host: "example.test", port: 8080, pathAndQuery: "/a")
        let squid = try Self.lines(.squid, [Self.entry(url: .absolute(url))])
        #expect(squid.first?.hasSuffix(" GET http://example.test:8080/a - HIER_NONE/- -") == true, "\(squid)")
        let json = try Self.lines(.json, [Self.entry(url: .absolute(url)), Self.entry(client: nil)])
        #expect(json.first?.contains(#""client":"10.1.2.3","method":"GET","url":"http://example.test:8080/a""#) == true, "\(json)")
        #expect(json.last?.contains(#""client":"-","#) == true, "\(json)")
    }

    /// A failed request's cause, in each format: last in larder and combined lines, a JSON
    /// field, Squid's `%err_code/%err_detail` in place of the content type (ten fields still).
    @Test func failedLinesNameTheirCauseInEveryFormat() throws {
        var failed = Self.entry(agent: "apt/2")
        failed = AccessLog.Entry(
            client: failed.client, method: "GET", target: failed.target, status: 502, outcome: .request(.error), bytes: 90,
            durationNanos: failed.durationNanos, attempts: 1, retries: nil, tls: nil, key: nil, user: nil, agent: "apt/2", detail: .dns)
        let larder = try Self.lines(.larder, [failed, Self.entry()])
        #expect(larder.first?.hasSuffix(" 502 error 90 1.234ms attempts=1 ua=\"apt/2\" detail=dns") == true, "\(larder)")
        #expect(larder.last?.contains("detail") == false)
        let combined = try Self.lines(.combined, [failed, Self.entry()])
        #expect(combined.first?.hasSuffix("\" 502 90 \"-\" \"apt/2\" \"dns\"") == true, "\(combined)")
        #expect(combined.last?.hasSuffix("\" 200 1234 \"-\" \"-\"") == true, "\(combined)")
        let json = try Self.lines(.json, [failed, Self.entry()])
        #expect(json.first?.hasSuffix(#","user_agent":"apt/2","detail":"dns"}"#) == true, "\(json)")
        #expect(json.last?.contains("detail") == false)
        let squid = try Self.lines(.squid, [failed, Self.entry()])
        #expect(squid.first?.hasSuffix(" TCP_MISS/502 90 GET http://example.test/a - HIER_NONE/- ERR_DNS_FAIL/dns") == true, "\(squid)")
        #expect(squid.first?.split(separator: " ", omittingEmptySubsequences: true).count == 10)
        var refused = failed
        refused.detail = .refused
        var timedOut = failed
        timedOut.detail = .timeout
        let tags = try Self.lines(.squid, [refused, timedOut]).map { $0.split(separator: " ", omittingEmptySubsequences: true)[3] }
        #expect(tags == ["TCP_DENIED/502", "TCP_MISS_TIMEDOUT/502"])
    }

    /// C1 controls (U+0080-U+009F: CSI, OSC...) steer a terminal as C0 ones do: they are
    /// replaced in every format, whether a header sent them as UTF-8 (each byte one Latin-1
    /// scalar as parsed) or a user name has them; a header's lone C1 byte is not UTF-8, `\xNN`.
    @Test func c1ControlsAreEscapedInEveryFormat() throws {
        // A User-Agent as the header parser gives it: a lone byte 0x9B, then OSC in UTF-8 (C2 9D).
        let agent = "a\u{9B}31mb\u{C2}\u{9D}0;x\u{7}c"
        let user = "u\u{9B}v"
        let entries = [Self.entry(user: user, agent: agent)]
        let larder = try Self.lines(.larder, entries)
        #expect(larder.first?.hasSuffix(#" user="u'v" ua="a\x9B31mb'0;x'c""#) == true, "\(larder)")
        let combined = try Self.lines(.combined, entries)
        #expect(combined.first?.hasSuffix(#" "-" "a\x9B31mb'0;x'c""#) == true, "\(combined)")
        #expect(combined.first?.contains("u%C2%9Bv") == true, "\(combined)")
        let json = try Self.lines(.json, entries)
        #expect(
            json.first?.hasSuffix(#","user":"u\u009bv","user_agent":"a\\x9B31mb\u009d0;x\u0007c"}"#) == true, "\(json)")
        // A URL's text (ASCII as parsed; here as if it were not).
        let squid = try Self.lines(.squid, [Self.entry(url: .text("http://example.test/a\u{9B}b"))])
        #expect(squid.first?.contains(" http://example.test/a''b ") == true, "\(squid)")
        for line in larder + combined + json + squid {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(line)")
        }
    }

    /// A User-Agent's obs-text bytes that are UTF-8 are logged as the text they spell, not one
    /// character a byte; bytes that are not UTF-8 are written as `\xNN`.
    @Test func aHeadersUTF8IsLoggedAsTextAndOtherBytesEscaped() throws {
        // "é" sent as UTF-8 (C3 A9), then a lone 0xE9, as the parser decodes them: a scalar a byte.
        let agent = "caf\u{C3}\u{A9} \u{E9}t\u{C3}"
        let larder = try Self.lines(.larder, [Self.entry(user: "jos\u{E9}", agent: agent)])
        #expect(larder.first?.hasSuffix(#" user="jos\#u{E9}" ua="caf\#u{E9} \xE9t\xC3""#) == true, "\(larder)")
        let combined = try Self.lines(.combined, [Self.entry(agent: agent)])
        #expect(combined.first?.hasSuffix(#" "-" "caf\#u{E9} \xE9t\xC3""#) == true, "\(combined)")
        let json = try Self.lines(.json, [Self.entry(agent: agent)])
        #expect(json.first?.hasSuffix(#","user_agent":"caf\#u{E9} \\xE9t\\xC3"}"#) == true, "\(json)")
    }

    /// A stale copy served because the origin failed names the origin's failure; in Squid's
    /// format its tag stays `TCP_REFRESH_FAIL_OLD`, with no suffix of the failure's.
    @Test func aStaleAnswerNamesTheOriginsFailure() throws {
        let base = Self.entry()
        let stale = AccessLog.Entry(
            client: base.client, method: "GET", target: base.target, status: 200, outcome: .request(.stale), bytes: 65,
            durationNanos: base.durationNanos, attempts: 1, retries: nil, tls: nil, key: nil, user: nil, agent: nil, detail: .timeout)
        let squid = try Self.lines(.squid, [stale])
        #expect(squid.first?.contains(" TCP_REFRESH_FAIL_OLD/200 65 GET ") == true, "\(squid)")
        #expect(squid.first?.hasSuffix(" ERR_READ_TIMEOUT/timeout") == true, "\(squid)")
        let larder = try Self.lines(.larder, [stale])
        #expect(larder.first?.hasSuffix(" 200 stale 65 1.234ms attempts=1 detail=timeout") == true, "\(larder)")
    }

    /// Each outcome's word and Squid's result code for it, as the typed outcome writes them.
    @Test func outcomesWriteTheirWordAndSquidCode() {
        let table: [(AccessLog.Outcome, Int, String, String)] = [
            (.request(.memoryHit), 200, "hit", "TCP_MEM_HIT"), (.request(.diskHit), 200, "disk_hit", "TCP_HIT"),
            (.request(.miss), 200, "miss", "TCP_MISS"), (.request(.revalidated), 200, "revalidated", "TCP_REFRESH_UNMODIFIED"),
            (.request(.stale), 200, "stale", "TCP_REFRESH_FAIL_OLD"), (.request(.intercept), 200, "intercept", "TCP_TUNNEL"),
            (.request(.admin), 200, "admin", "NONE"), (.request(.error), 404, "error", "NONE"),
            (.request(.error), 502, "error", "TCP_MISS"),
            (.truncated, 200, "truncated", "TCP_MISS"), (.tunnel(nil), 200, "tunnel", "TCP_TUNNEL"),
            (.tunnel(.idle), 200, "tunnel-idle", "TCP_MISS"), (.tunnel(.error), 200, "tunnel-error", "TCP_MISS"),
        ]
        for (outcome, status, word, code) in table {
            let entry = AccessLog.Entry(
                client: nil, method: "GET", target: .text("http://example.test/a"), status: status, outcome: outcome, bytes: 0,
                durationNanos: 0, attempts: 1, retries: nil, tls: nil, key: nil, user: nil, agent: nil)
            #expect(outcome.text == word && entry.squidCode == code, "\(outcome)")
        }
    }

    @Test func squidLinesReplaceSpacesInTheTarget() throws {
        let lines = try Self.lines(.squid, [Self.entry(url: .text("http://example.test/a b"))])
        #expect(lines.count == 1)
        #expect(lines.first?.hasSuffix(" 10.1.2.3 TCP_MEM_HIT/200 1234 GET http://example.test/a+b - HIER_NONE/- -") == true, "\(lines)")
    }
}

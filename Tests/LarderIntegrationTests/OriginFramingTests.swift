import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// A misbehaving origin's framing never reaches a client: the bytes on the client socket
    /// parse as exactly one response per request, none longer or shorter than it declared.
    @Suite(.timeLimit(.minutes(3))) struct OriginFraming {
        static let injected = "HTTP/1.1 200 OK\r\nX-Injected: 1\r\nContent-Length: 0\r\n\r\n"
        static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok"

        /// One origin misbehaviour: Content-Length field lines, chunked or not, and the body
        /// as sent (payload possibly longer or shorter than declared).
        struct Case: CustomStringConvertible {
            var lengths: [String]
            var chunked: Bool
            var payload: String
            var description: String { "CL=\(lengths) chunked=\(chunked) payload=\(payload.count) bytes" }

            var raw: String {
                var text = "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\n"
                for length in lengths { text += "Content-Length: \(length)\r\n" }
                if chunked {
                    text += "Transfer-Encoding: chunked\r\n\r\n"
                    text += String(payload.utf8.count, radix: 16) + "\r\n" + payload + "\r\n0\r\n\r\n"
                } else {
                    text += "\r\n" + payload
                }
                return text
            }
        }

        /// The generated set: each framing shape with payloads shorter, equal and longer than
        /// declared, with and without a whole second response hidden in the body.
        static var cases: [Case] {
            var cases: [Case] = []
            for payload in ["hello", injected, "hello" + injected] {
                let size = payload.utf8.count
                for lengths in [
                    ["0"], ["3"], ["\(size)"], ["\(size + 7)"], ["\(size)", "\(size)"], ["3", "\(size)"], ["3, \(size)"],
                    ["abc"], ["+\(size)"], ["-1"],
                ] {
                    for chunked in [false, true] { cases.append(Case(lengths: lengths, chunked: chunked, payload: payload)) }
                }
                cases.append(Case(lengths: [], chunked: true, payload: payload))
            }
            return cases
        }

        @Test func contentLengthWithChunkedGets502AndNothingIsStored() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            origin.script("/cl-te", .init(Case(lengths: ["0"], chunked: true, payload: Self.injected).raw))
            origin.script("/ok", .init(Self.ok))
            let (responses, stream) = try Self.pipeline(larder, paths: ["/cl-te", "/ok"], origin: origin)
            #expect(!stream.contains("X-Injected"), "the body hidden behind Content-Length: 0 never reaches the client")
            #expect(responses.first?.status == 502)
            #expect(responses.first?.text.contains("Transfer-Encoding and Content-Length") == true)
            // Not stored, not coalesced: the next request goes to the origin again.
            _ = try Self.pipeline(larder, paths: ["/cl-te"], origin: origin)
            #expect(origin.count("/cl-te") == 2)
        }

        @Test(arguments: [(1, 1 << 20), (2_000, 200)])
        func anOversizedResponseHeadGets502SayingSo(fields: Int, size: Int) throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            var head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
            for index in 0..<fields { head += "X-Big-\(index): " + String(repeating: "a", count: size) + "\r\n" }
            origin.script("/big-head", .init(head + "\r\nok"))
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/big-head")])
            #expect(result.status == 502)
            #expect(result.text.contains("response head"), "\(result.text)")
            #expect(!result.text.contains("Out of memory"))
            #expect(larder.child.stderr.contains("response head"))
        }

        @Test func aTricklingOriginIsCutAndNothingIsStored() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"1s\"\nmin_rate = \"64B\"\n")
            // 1 byte every 100 ms: never a stall of 1 s, but 10 B/s.
            let head = Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 200\r\n\r\n".utf8)
            origin.script("/trickle", .init(pieces: [head] + Array(repeating: [UInt8(ascii: "x")], count: 200), pause: 0.1))
            let first = try Curl.viaProxy(larder.proxy, [origin.url("/trickle")], timeout: 10)
            #expect(first.body.count < 200, "cut short, never completed")
            _ = try larder.child.waitForOutput { $0.contains("under the minimum rate") }
            let second = try Curl.viaProxy(larder.proxy, [origin.url("/trickle")], timeout: 10)
            #expect(second.cacheStatus?.hit != true, "nothing was stored")
            #expect(origin.count("/trickle") == 2)
        }

        /// Review 76 F2: an origin's 101 to a request that asked for no upgrade (RFC 9110
        /// §15.2.2) was taken by libcurl for the final answer; Larder saw an interim response,
        /// no head ever came, and the transfer paused on its "body" held the upstream connection
        /// past upstream.timeout and past its clients' leaving. It is a 502 at once.
        @Test func anUnaskedSwitchOfProtocolsIsA502() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"30s\"\n")
            var script = RawOrigin.Script(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                    + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: max-age=600\r\n\r\nok")
            script.keepsConnection = true
            origin.script("/switch", script)
            let started = Date()
            let answer = try Curl.viaProxy(larder.proxy, ["--max-time", "20", origin.url("/switch")], timeout: 25)
            #expect(answer.status == 502 && answer.text.contains("switched protocols"), "\(answer.status) \(answer.text)")
            #expect(Date().timeIntervalSince(started) < 10, "answered at once, not at a timeout")
            #expect(try Curl.viaProxy(larder.proxy, ["--max-time", "20", origin.url("/switch")], timeout: 25).status == 502)
            #expect(origin.count("/switch") == 2, "nothing stored or shared")
        }

        /// Scripts `path` as a 50 MB body trickled at 2 KB/s (above `upstream.min_rate`) and has a
        /// client give up on it after 1 s; its URL.
        static func trickleLeftAlone(_ path: String, origin: RawOrigin, larder: Larder) throws -> String {
            let head = Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 50000000\r\n\r\n".utf8)
            let piece = [UInt8](repeating: UInt8(ascii: "x"), count: 200)
            origin.script(path, .init(pieces: [head] + Array(repeating: piece, count: 300), pause: 0.1))
            let url = origin.url(path)
            let left = try Curl.viaProxy(larder.proxy, ["--max-time", "1", url], timeout: 10)
            #expect(left.exitCode == 28, "the client gave up")
            return url
        }

        /// Asks for `url` (stale, within stale-while-revalidate) and waits up to `within` seconds
        /// for the background refresh: whether the stored response is then another than `stored`.
        static func refreshedInTheBackground(_ url: String, from stored: Curl.Result, larder: Larder, within: Int) throws -> Bool {
            let stale = try Curl.viaProxy(larder.proxy, [url])
            #expect(stale.cacheStatus?.hit == true, "served stale, refreshed in the background")
            for _ in 0..<(within * 4) {
                usleep(250_000)
                let again = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", url])
                if again.status == 200 && again.header("x-request-number") != stored.header("x-request-number") { return true }
            }
            return false
        }

        /// Review 77 F3: a fill every client left goes on to be stored while what is left is
        /// under finish_abandoned_max; an origin trickling a large body just above min_rate held
        /// the connection (and a descriptor) for days. Alone, it goes on for twice
        /// upstream.timeout at most.
        @Test func aFillLeftAloneStopsAfterTwiceTheUpstreamTimeout() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"2s\"\n")
            _ = try Self.trickleLeftAlone("/trickle-alone", origin: origin, larder: larder)
            _ = try larder.child.waitForOutput(timeout: 15) { $0.contains("a transfer is given up: no client reads it") }
            #expect(larder.child.stderr.contains("twice upstream.timeout"))
        }

        /// Review 79 A1: judged on its rate since it was left, a fill that got a burst after its
        /// client left went on trickling for minutes (the burst paid for the trickle); the rate
        /// judged is the last window's.
        @Test func aBurstAfterTheClientLeftDoesNotPayForATrickle() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"2s\"\n")
            let trickle = Array(repeating: [UInt8](repeating: UInt8(ascii: "x"), count: 200), count: 20)
            let burst = [[UInt8](repeating: UInt8(ascii: "y"), count: 4_000_000)]
            let rest = Array(repeating: [UInt8](repeating: UInt8(ascii: "z"), count: 200), count: 600)
            let length = 20 * 200 + 4_000_000 + 600 * 200
            let head = Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: \(length)\r\n\r\n".utf8)
            origin.script("/burst-then-trickle", .init(pieces: [head] + trickle + burst + rest, pause: 0.1))
            let left = try Curl.viaProxy(larder.proxy, ["--max-time", "1", origin.url("/burst-then-trickle")], timeout: 10)
            #expect(left.exitCode == 28, "the client gave up")
            // Alone from 1 s; the burst at 2 s; judged from 5 s, when the last window is trickle.
            _ = try larder.child.waitForOutput(timeout: 15) { $0.contains("a transfer is given up: no client reads it") }
            #expect(larder.child.stderr.contains("twice upstream.timeout"))
        }

        /// Review 80 F3: a client that joined the fill for a moment every few seconds started its
        /// count again each time, and kept a trickling fill no one waited for going without end.
        @Test func aClientJoiningNowAndThenDoesNotKeepATrickleGoing() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"2s\"\n")
            let url = try Self.trickleLeftAlone("/trickle-visited", origin: origin, larder: larder)
            var givenUp = false
            for _ in 0..<8 where !givenUp {
                usleep(1_000_000)
                _ = try Curl.viaProxy(larder.proxy, ["--max-time", "1", url], timeout: 10)
                givenUp = larder.child.stderr.contains("a transfer is given up: no client reads it")
            }
            #expect(givenUp, "given up between the visits")
            #expect(origin.count("/trickle-visited") <= 2, "the visits before the cut joined the one fill (the one after starts another)")
        }

        /// Review 80 F2: `finish_abandoned_max` (what is left when every client has gone) also
        /// cut a background refresh, which never had a client: an object larger than it was never
        /// refreshed in the background. Its time is what bounds it.
        @Test func aBackgroundRefreshLargerThanFinishAbandonedMaxCompletes() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[coalesce]\nfinish_abandoned_max = \"64KiB\"\n")
            let url = origin.url("/large-refresh?size=400000&cc=max-age=1,stale-while-revalidate=600")
            let stored = try Curl.viaProxy(larder.proxy, [url])
            #expect(stored.status == 200 && stored.body.count == 400_000)
            sleep(2)
            #expect(try Self.refreshedInTheBackground(url, from: stored, larder: larder, within: 5), "\(larder.child.stderr)")
        }

        /// Review 78 N3: the bound on a fill no client reads cut background refreshes (which
        /// never have a reader) of any body longer than twice upstream.timeout, however fast it
        /// came. What is judged is whether the rest would come soon at its rate.
        @Test func aBackgroundRefreshLongerThanTheBoundButSteadyCompletes() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"3s\"\n")
            let path = "/steady?size=655360&slow=0.8&cc=max-age=1,stale-while-revalidate=600"
            let url = origin.url(path)
            let stored = try Curl.viaProxy(larder.proxy, ["--max-time", "30", url], timeout: 35)
            #expect(stored.status == 200 && stored.body.count == 655_360)
            sleep(2)
            #expect(
                try Self.refreshedInTheBackground(url, from: stored, larder: larder, within: 30),
                "the 8 s refresh completed though 6 s is twice upstream.timeout")
            #expect(!larder.child.stderr.contains("a transfer is given up"))
        }

        /// RFC 9110 §15.2: interim responses are forwarded to HTTP/1.1 clients, never to HTTP/1.0
        /// ones, and never stored.
        @Test func interimResponsesAreForwardedAndNeverStored() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            origin.script(
                "/hints",
                .init(
                    "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                        + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: max-age=600\r\n\r\nok"))
            func fetch(_ version: String) throws -> String {
                let connection = try RawConnection(port: larder.proxyPort)
                connection.send("GET \(origin.url("/hints")) HTTP/\(version)\r\nHost: x\r\nConnection: close\r\n\r\n")
                return String(decoding: connection.readUntilClose(), as: UTF8.self)
            }
            let first = try fetch("1.1")
            #expect(
                first.hasPrefix(
                    "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n"),
                "\(first)")
            #expect(first.hasSuffix("\r\n\r\nok"))
            let hit = try fetch("1.1")
            #expect(hit.hasPrefix("HTTP/1.1 200 OK\r\n"), "a hit carries no stored interim response: \(hit)")
            #expect(hit.contains("Cache-Status: larder; hit"))
            origin.script(
                "/hints10", .init("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send("GET \(origin.url("/hints10")) HTTP/1.0\r\nHost: x\r\n\r\n")
            let old = String(decoding: connection.readUntilClose(), as: UTF8.self)
            #expect(old.hasPrefix("HTTP/1.1 200 OK\r\n"), "no 1xx for an HTTP/1.0 client: \(old)")
            #expect(origin.count("/hints") == 1)
        }

        /// Review 117 F3: a bare CR (or another control byte) in an origin's reason phrase, or in
        /// an obs-fold line, reached clients and the cache as it came, where a client that ends
        /// lines at a CR reads a second response (RFC 9112 §2.2, §4, §5.2). The reason goes as
        /// the status's own; a folded line with a CR drops its field, as any value with one.
        @Test func controlBytesInAReasonOrAFoldedLineNeverReachAClient() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            let smuggled = "HTTP/1.1 200 OK\rContent-Length: 4\r\rEVIL"
            origin.script(
                "/reason",
                .init("HTTP/1.1 200 OK\rContent-Length: 0\r\r\(smuggled)\r\nContent-Length: 2\r\nCache-Control: max-age=600\r\n\r\nok"))
            origin.script(
                "/escape", .init("HTTP/1.1 200 OK\u{1b}]0;pwn\u{07}\u{7f}\r\nContent-Length: 2\r\nCache-Control: max-age=600\r\n\r\nok"))
            origin.script(
                "/folded",
                .init(
                    "HTTP/1.1 200 OK\r\nX-A: a\r\n b\rContent-Length: 0\r\r\(smuggled)\r\nX-B: kept\r\n c\r\n"
                        + "Content-Length: 2\r\nCache-Control: max-age=600\r\n\r\nok"))
            func fetch(_ path: String) throws -> String {
                let connection = try RawConnection(port: larder.proxyPort)
                connection.send("GET \(origin.url(path)) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return String(decoding: connection.readUntilClose(), as: UTF8.self)
            }
            for path in ["/reason", "/escape", "/folded"] {
                for round in ["miss", "hit"] {
                    let answer = try fetch(path)
                    let head = answer.components(separatedBy: "\r\n\r\n").first ?? ""
                    #expect(
                        answer.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(path) \(round): the status's own reason: \(answer.debugDescription)")
                    #expect(
                        !head.utf8.contains { $0 < 0x20 && $0 != 13 && $0 != 10 && $0 != 9 || $0 == 0x7F },
                        "\(path) \(round): \(head.debugDescription)")
                    #expect(
                        !answer.contains("EVIL") && !head.contains("\r\r"),
                        "\(path) \(round): no CR but in CRLF: \(answer.debugDescription)")
                    #expect(answer.hasSuffix("\r\n\r\nok"), "\(path) \(round)")
                    if path == "/folded" {
                        #expect(!head.contains("X-A") && head.contains("X-B: kept c"), "\(path) \(round): \(head.debugDescription)")
                    }
                    if round == "hit" { #expect(head.contains("Cache-Status: larder; hit"), "\(path): stored, clean") }
                }
                #expect(origin.count(path) == 1)
            }
        }

        /// Review 74 F1: an interim response went to every reader of the fill, those that had
        /// joined it for another user too, before the final head could say the answer was not
        /// theirs (Vary: Cookie here; a 103 may carry Link to a user's resources, or a cookie).
        /// It goes to the fill's own reader only.
        @Test func anInterimResponseGoesOnlyToTheRequestItAnswers() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            let hint = "HTTP/1.1 103 Early Hints\r\nLink: </alice.css>; rel=preload\r\n\r\n"
            let final = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: max-age=600\r\nVary: Cookie\r\n\r\nok"
            origin.script("/hinted", .init(pieces: [[], Array(hint.utf8), Array(final.utf8)], pause: 1))
            func ask(_ user: String) throws -> RawConnection {
                let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
                connection.send("GET \(origin.url("/hinted")) HTTP/1.1\r\nHost: x\r\nCookie: user=\(user)\r\nConnection: close\r\n\r\n")
                return connection
            }
            let alice = try ask("alice")
            usleep(300_000)
            let bob = try ask("bob")  // joins Alice's fill before the hint comes
            let alices = String(decoding: alice.readUntilClose(), as: UTF8.self)
            let bobs = String(decoding: bob.readUntilClose(), as: UTF8.self)
            #expect(alices.components(separatedBy: "103 Early Hints").count == 2, "\(alices)")
            // Bob's own request (another variant) brings its own hint; Alice's must not reach him.
            #expect(bobs.components(separatedBy: "103 Early Hints").count == 2, "\(bobs)")
            #expect(bobs.hasSuffix("\r\n\r\nok") && origin.count("/hinted") == 2)
        }

        @Test func conflictingContentLengthsGet502() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            origin.script("/two", .init(Case(lengths: ["3", "5"], chunked: false, payload: "hello").raw))
            let (responses, stream) = try Self.pipeline(larder, paths: ["/two"], origin: origin)
            #expect(responses.first?.status == 502, "\(stream)")
            #expect(!stream.contains("hel\r\n") && !stream.hasSuffix("hello"))
        }

        /// The property: for every case, a pipelining client reads at most one response per
        /// request, none carries more body than it declared, only the last may be cut short
        /// (and then the connection is closed), nothing injected appears, and a complete
        /// second response is the origin's answer to the second request.
        @Test func everyMisbehaviourParsesAsOneResponsePerRequest() throws {
            let origin = try RawOrigin()
            let larder = try Larder()
            origin.script("/ok", .init(Self.ok))
            for (index, misbehaviour) in Self.cases.enumerated() {
                let path = "/case-\(index)"
                origin.script(path, .init(misbehaviour.raw))
                let (responses, stream) = try Self.pipeline(larder, paths: [path, "/ok"], origin: origin)
                // A second response hidden in a body may arrive as body bytes of a correctly framed
                // response, never as a response of its own.
                #expect(!responses.contains { $0.injected }, "\(misbehaviour): \(stream)")
                #expect((1...2).contains(responses.count), "\(misbehaviour): \(responses.count) responses")
                for (position, response) in responses.enumerated() where !response.complete {
                    #expect(position == responses.count - 1, "\(misbehaviour): only the last response may be cut short")
                }
                if let first = responses.first, first.complete, first.status == 200 {
                    let declared = Set(
                        misbehaviour.lengths.flatMap { $0.split(separator: ",") }
                            .map { $0.trimmingCharacters(in: .whitespaces) })
                    #expect(
                        declared.count <= 1 && !misbehaviour.chunked || misbehaviour.lengths.isEmpty,
                        "\(misbehaviour): accepted ambiguous framing")
                }
                if responses.count == 2 {
                    #expect(responses[1].complete && responses[1].text == "ok", "\(misbehaviour): \(responses[1].text)")
                }
            }
        }

        struct Parsed {
            let status: Int
            var injected = false
            let body: [UInt8]
            let complete: Bool
            var text: String { String(decoding: body, as: UTF8.self) }
        }

        /// Sends the requests pipelined on one connection, reads until Larder closes it (or
        /// 5 s pass), and parses the stream strictly.
        static func pipeline(_ larder: Larder, paths: [String], origin: RawOrigin) throws -> ([Parsed], String) {
            let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 5)
            var requests = ""
            for (index, path) in paths.enumerated() {
                let last = index == paths.count - 1
                requests +=
                    "GET \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\(last ? "Connection: close\r\n" : "")\r\n"
            }
            connection.send(requests)
            let bytes = connection.readUntilClose()
            return (parse(bytes), String(decoding: bytes, as: UTF8.self))
        }

        /// Splits a byte stream into responses by their own framing (Content-Length or chunked).
        static func parse(_ bytes: [UInt8]) -> [Parsed] {
            var responses: [Parsed] = []
            var rest = bytes[...]
            while !rest.isEmpty {
                guard let headEnd = rest.firstRange(of: Array("\r\n\r\n".utf8)) else {
                    responses.append(Parsed(status: 0, body: Array(rest), complete: false))
                    break
                }
                let head = String(decoding: rest[..<headEnd.lowerBound], as: UTF8.self)
                rest = rest[headEnd.upperBound...]
                let lines = head.components(separatedBy: "\r\n")
                let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? 0
                let fields = lines.dropFirst().map { $0.lowercased() }
                let injected = fields.contains { $0.hasPrefix("x-injected:") }
                if let length = fields.first(where: { $0.hasPrefix("content-length:") }).flatMap({
                    Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces))
                }) {
                    let body = Array(rest.prefix(length))
                    rest = rest.dropFirst(body.count)
                    responses.append(Parsed(status: status, injected: injected, body: body, complete: body.count == length))
                    if body.count < length { break }
                } else if fields.contains(where: { $0.hasPrefix("transfer-encoding:") }) {
                    var body: [UInt8] = []
                    var complete = false
                    while let lineEnd = rest.firstRange(of: Array("\r\n".utf8)),
                        let size = Int(String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self), radix: 16)
                    {
                        rest = rest[lineEnd.upperBound...]
                        guard rest.count >= size + 2 else { break }
                        body += rest.prefix(size)
                        rest = rest.dropFirst(size + 2)
                        if size == 0 {
                            complete = true
                            break
                        }
                    }
                    responses.append(Parsed(status: status, injected: injected, body: body, complete: complete))
                    if !complete { break }
                } else {
                    responses.append(Parsed(status: status, injected: injected, body: Array(rest), complete: true))
                    break
                }
            }
            return responses
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// Attacks on the second wave of issue 59 (the Fill split, the Counter table, the Exchange
    /// state): a client must not take another's answer from a fill it was released from, nor
    /// choose with a GET's content what others get; what a hostile client or origin does shows
    /// in the counters the table declares.
    @Suite(.timeLimit(.minutes(3))) struct Review59WaveTwo {
        /// A body that does not hash to its URL's digest fails the exchange for good: the
        /// failure is counted under its reason and as an upstream error, as every other failure
        /// of the transfer is (the `digest` series was declared and never moved).
        @Test func aDigestMismatchIsCountedAsAFailureOfItsReason() throws {
            let origin = try Origin()
            let path = "/v2/lib/a/blobs/sha256:\(try SharedKeys.digest("the real layer"))"
            try origin.script(path, [.init(body: "a forged layer")], conditional: false)
            let larder = try Larder(config: "[cache]\npresets = [\"oci\"]\n" + SharedKeys.resolve([("reg.test", origin)]))
            let refused = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(origin.port)\(path)"])
            #expect(refused.status == 502, "\(refused.status) \(refused.text)")
            let upstream = try larder.stats().upstream
            #expect(upstream.failures["digest"] == 1, "\(upstream.failures)")
            #expect(upstream.errors == 1, "no usable response: an upstream error")
        }

        /// RFC 9110 §9.3.1: content in a GET has no defined semantics, but an origin may read it
        /// (search APIs do). A client that sends a GET with content must not choose what every
        /// other client gets for the URL: that answer goes to it alone, neither stored nor
        /// shared, and what is stored for the URL stays.
        @Test func aGetsContentShapesNoAnswerButItsOwn() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/search?echo=1&cc=max-age=600")
            let planted = try Curl.viaProxy(larder.proxy, ["-X", "GET", "-H", "Content-Type:", "--data-binary", "PLANTED", url])
            #expect(planted.status == 200 && planted.text == "PLANTED", "the origin reads it: \(planted.text)")
            let next = try Curl.viaProxy(larder.proxy, [url])
            #expect(next.text != "PLANTED", "another client got the content the first one sent: \(next.headers)")
            #expect(next.header("cache-status")?.hasPrefix("larder; fwd=uri-miss") == true, "\(next.headers)")
            let stored = try Curl.viaProxy(larder.proxy, ["-X", "GET", "-H", "Content-Type:", "--data-binary", "AGAIN", url])
            #expect(stored.header("cache-status")?.hasPrefix("larder; hit") == true, "a stored answer still serves it")
            #expect(try Curl.viaProxy(larder.proxy, [url]).text.isEmpty, "the bodiless GET's answer stays stored")
            // A GET that declares no content (Content-Length: 0) is an ordinary GET.
            let empty = origin.url("/search?echo=1&cc=max-age=600&v=1")
            _ = try Curl.viaProxy(larder.proxy, ["-H", "Content-Length: 0", empty])
            #expect(try Curl.viaProxy(larder.proxy, [empty]).header("cache-status")?.hasPrefix("larder; hit") == true)
            // Two such clients at once do not share one upstream request either.
            let slow = origin.url("/search?echo=1&cc=max-age=600&delay=1&v=2")
            let first = try ChildProcess(
                "/usr/bin/curl", ["-s", "--proxy", larder.proxy, "-X", "GET", "-H", "Content-Type:", "--data-binary", "ONE", slow])
            defer { first.kill() }
            usleep(300_000)
            let second = try Curl.viaProxy(larder.proxy, ["-X", "GET", "-H", "Content-Type:", "--data-binary", "TWO", slow])
            #expect(second.text == "TWO", "\(second.text)")
            first.waitUntilExit()
            #expect(first.stdout == "ONE")
        }

        /// A client that attaches to a fill in flight and is released from it at once (its
        /// request selects another variant, RFC 9111 §4.1) hears of it on the loop's next turn.
        /// Meanwhile a flush of its connection (an earlier pipelined answer written) must not
        /// take the fill's response: it got the other client's variant (with `Vary: Cookie`,
        /// that client's own page), then its own answer ran into that one's framing.
        /// One loop: the second connection must land on the loop of the fill in flight (with
        /// two, it lands on the other half the time, cannot move there with an answer queued,
        /// and rightly fetches alone, which this test is not about).
        @Test func aReaderReleasedForAnotherVariantNeverTakesTheFillsResponse() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n")
            let hit = origin.url("/variant-hit?cc=max-age=600&size=100")
            _ = try Curl.viaProxy(larder.proxy, [hit])
            let varied = origin.url("/variant?cc=max-age=600&size=1000000&slow=0.3&h=Vary:Accept-Language")
            let first = try RawConnection(port: larder.proxyPort)
            first.send("GET \(varied) HTTP/1.1\r\nHost: x\r\nAccept-Language: en\r\n\r\n")
            var firstNumber: String?
            for _ in 0..<40 {
                guard let line = first.readLine()?.trimmingCharacters(in: .whitespacesAndNewlines), !line.isEmpty else { break }
                if line.lowercased().hasPrefix("x-request-number:") {
                    firstNumber = line.dropFirst(17).trimmingCharacters(in: .whitespaces)
                }
            }
            #expect(firstNumber != nil, "the English answer's head is out, its body in flight")
            // An answer already queued, then the other variant: both in one read.
            let second = try RawConnection(port: larder.proxyPort)
            second.send(
                "GET \(hit) HTTP/1.1\r\nHost: x\r\n\r\nGET \(varied) HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\n\r\n")
            let queued = try second.readResponse()
            #expect(queued.status == 200 && queued.body.count == 100)
            let french = try second.readResponse()
            #expect(french.status == 200 && french.body.count == 1_000_000, "\(french.status) \(french.body.count)")
            #expect(french.header("x-request-number") != firstNumber, "the French request got the English answer")
            #expect(!second.hasInput(within: 500), "nothing after the answer")
            let coalescing = try larder.stats().coalescing
            #expect(coalescing.released == 1, "the French request met the English fill in flight: \(coalescing)")
        }

        /// A request body whose chunked framing is malformed (RFC 9112 §7.1: a smuggling
        /// attempt as much as a bad head is) is refused, and counted as a bad request, whether it
        /// was being read whole or streaming upstream when the fault came.
        @Test func aMalformedRequestBodyCountsAsABadRequest() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nrequest_body_buffer = \"1KiB\"\n")
            let url = origin.url("/upload?echo=1")
            let chunk = String(repeating: "a", count: 2000)
            for (body, place) in [("zz\r\n", "read whole"), ("7d0\r\n\(chunk)\r\nzz\r\n", "streaming")] {
                let before = try larder.stats().refused.badRequests
                let connection = try RawConnection(port: larder.proxyPort)
                connection.send("POST \(url) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
                let refused = try connection.readResponse()
                #expect(refused.status == 400, "\(place): \(refused.status) \(refused.text)")
                #expect(try larder.stats().refused.badRequests == before + 1, "\(place)")
            }
        }

        /// RFC 9111 §4.3.5: a HEAD whose 200 matches the stored GET updates it as a 304 would;
        /// the counter that says so ("304 or matching HEAD") counts it.
        @Test func aMatchingHeadCountsAsARevalidation() throws {
            let origin = try Origin()
            func ok(_ version: String) -> Scripted {
                Scripted(headers: [("Cache-Control", "max-age=3600"), ("ETag", "\"h1\""), ("X-Version", version)], body: "same body")
            }
            try origin.script("/head-update", [ok("1"), ok("2")], conditional: false)
            let larder = try Larder()
            let url = origin.url("/head-update")
            let first = try Curl.viaProxy(larder.proxy, [url])
            #expect(first.header("x-version") == "1")
            let head = try Curl.viaProxy(larder.proxy, ["-I", "-H", "Cache-Control: no-cache", url])
            #expect(head.header("x-version") == "2", "\(head.headers)")
            let updated = try Curl.viaProxy(larder.proxy, [url])
            #expect(updated.header("x-version") == "2", "the HEAD updated the stored GET: \(updated.headers)")
            #expect(updated.header("cache-status")?.hasPrefix("larder; hit") == true)
            #expect(try larder.stats().upstream.revalidated == 1)
        }
    }
}

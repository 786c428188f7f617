import Foundation
import Testing

extension IntegrationTests {
    /// Larder's own validation of a stale entry, where the conformance catalogue's one client
    /// at a time cannot reach: a client that leaves while the origin's answer is on its way.
    @Suite(.timeLimit(.minutes(2))) struct Revalidation {
        /// Stores `path`'s first scripted answer (stale, body "v1"), then has a client ask for it
        /// and leave while the second (a 304 naming "v2", delayed 1 s) is on its way; returns
        /// once the origin has answered that validation, with the request line to send next.
        static func validationTheClientLeft(
            _ origin: Origin, _ larder: Larder, _ path: String, stored: Scripted, then next: Scripted
        ) throws -> String {
            try origin.script(
                path, [stored, Scripted(status: 304, headers: [maxAgeHour, ("ETag", "\"v2\"")], delay: 1.0), next],
                conditional: false)
            let request = "GET \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
            let first = try RawConnection(port: larder.proxyPort)
            first.send(request)
            #expect(try first.readResponse().text == "v1")
            do {
                // Revalidates the stale entry, and leaves before the 304 comes.
                let leaving = try RawConnection(port: larder.proxyPort)
                leaving.send(request)
                usleep(200_000)
            }
            // The 304 has come and gone: the origin counted the validation.
            for _ in 0..<50 where try origin.count(path) < 2 { usleep(100_000) }
            usleep(1_500_000)
            #expect(try origin.count(path) == 2)
            return request
        }

        /// Review 113's first finding: a 304 naming another representation than the one
        /// validated, arriving after the only client left (the request is then not sent again),
        /// still updates nothing (RFC 9111 §4.3.4). Before, it was merged: the stored v1 took
        /// v2's ETag, and every later validation confirmed it as v2 for good.
        @Test func aContradicting304AfterTheClientLeftUpdatesNothing() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/left"
            let request = try Self.validationTheClientLeft(
                origin, larder, path, stored: staleOnArrival(etagV1, body: "v1"), then: ok(maxAgeHour, ("ETag", "\"v2\""), body: "v2"))
            let last = try RawConnection(port: larder.proxyPort)
            last.send(request)
            let response = try last.readResponse()
            #expect(response.text == "v2", "v1's body must not be served, under v2's ETag or any")
            #expect(response.header("etag") == "\"v2\"")
            #expect(try origin.count(path) == 3, "the 304 updated nothing: the stale entry was validated again")
        }

        /// Review 114: the same 304 after the client left leaves the stale entry as it is, for
        /// stale-if-error when the origin then fails (it was dropped, and every later client got
        /// the origin's 503).
        @Test func aContradicting304AfterTheClientLeftLeavesTheEntryForStaleIfError() throws {
            let origin = try Origin()
            let larder = try Larder()
            let request = try Self.validationTheClientLeft(
                origin, larder, "/left-then-down", stored: staleOnArrival(etagV1, cc("stale-if-error=600"), body: "v1"),
                then: Scripted(status: 503, body: "down"))
            let last = try RawConnection(port: larder.proxyPort, receiveTimeout: 30)
            last.send(request)
            let response = try last.readResponse()
            #expect(response.status == 200 && response.text == "v1", "stale-if-error: \(response.status) \(response.text)")
        }
    }
}

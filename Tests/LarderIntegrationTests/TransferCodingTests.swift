import Foundation
import Testing

extension IntegrationTests {
    /// Transfer codings other than chunked from an origin: Larder never asks for one (it sends
    /// no TE), so the answer is refused with 502 and stored nowhere, never served as if its
    /// still-coded bytes were the content.
    @Suite(.timeLimit(.minutes(3))) struct OriginTransferCodings {
        /// "plain text, coded twice\n", gzip-compressed.
        static let gzipped: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x2b, 0xc8, 0x49, 0xcc, 0xcc, 0x53, 0x28, 0x49, 0xad, 0x28,
            0xd1, 0x51, 0x48, 0xce, 0x4f, 0x49, 0x4d, 0x51, 0x28, 0x29, 0xcf, 0x4c, 0x4e, 0xe5, 0x02, 0x00, 0xcf, 0x96, 0x7e, 0x48,
            0x18, 0x00, 0x00, 0x00,
        ]

        static func raw(_ codings: String) -> [UInt8] {
            let head = Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nTransfer-Encoding: \(codings)\r\n\r\n".utf8)
            guard codings.hasSuffix("chunked") else { return head + gzipped }  // ended by the close
            return head + Array((String(gzipped.count, radix: 16) + "\r\n").utf8) + gzipped + Array("\r\n0\r\n\r\n".utf8)
        }

        @Test(arguments: ["gzip, chunked", "gzip", "x-unknown, chunked", "chunked, chunked"])
        func aCodingOtherThanChunkedIsNotServedAsPlainStoredBytes(codings: String) throws {
            let origin = try RawOrigin()
            origin.script("/coded", .init(pieces: [Self.raw(codings)], pause: 0))
            let larder = try Larder()
            for attempt in 1...2 {
                let result = try Curl.viaProxy(larder.proxy, [origin.url("/coded")])
                #expect(result.status == 502, "\(codings), attempt \(attempt): \(result.status) \(result.headers)")
                #expect(!result.body.starts(with: [0x1f, 0x8b]), "the coded bytes reached the client as the content")
                #expect(result.text.contains("Transfer-Encoding"), "\(result.text)")
            }
            #expect(origin.count("/coded") == 2, "nothing stored: each request went to the origin")
            #expect(larder.child.stderr.contains("Transfer-Encoding"))
        }

        /// The answer to a HEAD has no body: its codings say what a GET's body would have had
        /// (RFC 9112 §6.1), and curl reads nothing after its head.
        @Test func aHEADAnswerNamingACodingIsServed() throws {
            let origin = try RawOrigin()
            origin.script("/head", .init("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"))
            let larder = try Larder()
            let result = try Curl.viaProxy(larder.proxy, ["-I", origin.url("/head")])
            #expect(result.status == 200, "\(result.headers)")
        }

        @Test func chunkedAloneIsStillServedAndStored() throws {
            let origin = try RawOrigin()
            let body = "plain"
            origin.script(
                "/chunked",
                .init("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\n\(body)\r\n0\r\n\r\n"))
            let larder = try Larder()
            let first = try Curl.viaProxy(larder.proxy, [origin.url("/chunked")])
            let second = try Curl.viaProxy(larder.proxy, [origin.url("/chunked")])
            #expect(first.status == 200 && first.text == body && second.text == body)
            #expect(origin.count("/chunked") == 1)
        }
    }
}

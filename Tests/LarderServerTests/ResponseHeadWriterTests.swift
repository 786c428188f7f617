import LarderHTTP
import Testing

@testable import LarderServer

/// The one keep-alive decision every head Larder writes goes through, and the head's end.
@Suite struct ResponseHeadWriterTests {
    struct Row: Sendable, CustomStringConvertible {
        let version: HTTPVersion
        let keepAlive: Bool
        let bodyComplete: Bool
        let closeDelimited: Bool
        let draining: Bool
        let expected: ResponseHeadWriter.ConnectionField
        var description: String {
            "\(version) keepAlive=\(keepAlive) bodyComplete=\(bodyComplete) closeDelimited=\(closeDelimited) draining=\(draining)"
        }
    }

    static let rows: [Row] = [
        // HTTP/1.1 persists by default and says nothing (RFC 9112 §9.3).
        Row(version: .http1_1, keepAlive: true, bodyComplete: true, closeDelimited: false, draining: false, expected: .none),
        // HTTP/1.0 with `Connection: keep-alive` persists only when told so.
        Row(version: .http1_0, keepAlive: true, bodyComplete: true, closeDelimited: false, draining: false, expected: .keepAlive),
        // The client's `close`, HTTP/1.0 without `keep-alive`, or an error that ordered a close.
        Row(version: .http1_1, keepAlive: false, bodyComplete: true, closeDelimited: false, draining: false, expected: .close),
        Row(version: .http1_0, keepAlive: false, bodyComplete: true, closeDelimited: false, draining: false, expected: .close),
        // A request body not read to its end: what follows is not a request.
        Row(version: .http1_1, keepAlive: true, bodyComplete: false, closeDelimited: false, draining: false, expected: .close),
        Row(version: .http1_0, keepAlive: true, bodyComplete: false, closeDelimited: false, draining: false, expected: .close),
        // A body that ends with the close (RFC 9112 §6.3).
        Row(version: .http1_0, keepAlive: true, bodyComplete: true, closeDelimited: true, draining: false, expected: .close),
        Row(version: .http1_1, keepAlive: true, bodyComplete: true, closeDelimited: true, draining: false, expected: .close),
        // Shutting down.
        Row(version: .http1_1, keepAlive: true, bodyComplete: true, closeDelimited: false, draining: true, expected: .close),
        Row(version: .http1_0, keepAlive: true, bodyComplete: true, closeDelimited: false, draining: true, expected: .close),
    ]

    @Test(arguments: rows) func theConnectionFieldIsDecidedOnce(_ row: Row) {
        let field = ResponseHeadWriter.connection(
            version: row.version, keepAlive: row.keepAlive, requestBodyComplete: row.bodyComplete, closeDelimited: row.closeDelimited,
            draining: row.draining)
        #expect(field == row.expected)
    }

    @Test func aHeadEndsWithItsFramingAndConnectionField() {
        func ended(length: Int?, chunked: Bool, connection: ResponseHeadWriter.ConnectionField) -> String {
            var head = ResponseHeadWriter(status: 200)
            head.field("Content-Type", "text/plain")
            head.end(length: length, chunked: chunked, connection: connection)
            return String(decoding: head.bytes, as: UTF8.self)
        }
        #expect(
            ended(length: 5, chunked: false, connection: .none)
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n")
        #expect(
            ended(length: nil, chunked: true, connection: .close)
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        #expect(
            ended(length: 0, chunked: false, connection: .keepAlive)
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n")
        #expect(ended(length: nil, chunked: false, connection: .none) == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
    }

    @Test func interimHeadsHaveNoFramingNorConnectionField() {
        #expect(String(decoding: ResponseHeadWriter.continueHead, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(String(decoding: ResponseHeadWriter.connectionEstablished, as: UTF8.self) == "HTTP/1.1 200 Connection established\r\n\r\n")
    }

    /// The Cache-Status member renders the forward reason's RFC 9211 text.
    @Test func cacheStatusRendersTheForwardReasonText() {
        var status = CacheStatus.forwarded(.varyMiss)
        status.stored = true
        #expect(status.rendered == "larder; fwd=vary-miss; stored")
        #expect(CacheStatus.forwarded(.uriMiss).rendered == "larder; fwd=uri-miss")
        #expect(ForwardReason.allCases.filter(\.validatesStored) == [.request, .stale])
    }
}

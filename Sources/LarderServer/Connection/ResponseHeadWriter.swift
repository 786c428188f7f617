import LarderCache
import LarderHTTP

/// Writes the heads of the responses Larder sends: stored hits (their prepared head then
/// ``writeEnd(length:chunked:connection:into:)`` in place), forwarded responses, 304s and
/// 416s, slices, errors, the admin API and the setup page, interim responses. The end of every
/// final head (framing, `Connection`, blank line) is written here, and whether the connection
/// stays open after it is decided once, by ``connection(version:keepAlive:requestBodyComplete:closeDelimited:draining:)``.
struct ResponseHeadWriter {
    /// The head so far.
    private(set) var bytes: [UInt8]

    /// A head from its status line (`HTTP/1.1 <status> <reason>`); the reason is the standard
    /// one unless given.
    init(status: Int, reason: String? = nil, capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        HeadSerializer.appendStatusLine(status, reason ?? HTTPStatus.reason(status), to: &bytes)
    }

    /// The `Connection` field a final head carries, saying what the connection does next.
    enum ConnectionField: Equatable, Sendable {
        /// None: an HTTP/1.1 connection persists by default.
        case none
        /// `Connection: close`: the connection closes after this response.
        case close
        /// `Connection: keep-alive`: an HTTP/1.0 client's connection persists only when the
        /// response says so (RFC 9112 §9.3, Appendix C.2.2).
        case keepAlive
    }

    /// Whether the connection stays open after a response, as the field its head carries.
    /// - Parameters:
    ///   - version: the request's version.
    ///   - keepAlive: the client asked for a persistent connection (HTTP/1.1 without
    ///     `Connection: close`, HTTP/1.0 with `keep-alive`: `RequestHead.keepAlive`), and
    ///     nothing since has ordered a close (an error after which the connection's bytes
    ///     cannot be trusted, a refused admin request, a failed authentication backlog).
    ///   - requestBodyComplete: false when the request body was not read to its end: what
    ///     follows on the connection is not the next request.
    ///   - closeDelimited: the body ends with the close (RFC 9112 §6.3).
    ///   - draining: the server is shutting down.
    static func connection(
        version: HTTPVersion, keepAlive: Bool, requestBodyComplete: Bool, closeDelimited: Bool, draining: Bool
    ) -> ConnectionField {
        if !keepAlive || !requestBodyComplete || closeDelimited || draining { return .close }
        return version == .http1_0 ? .keepAlive : .none
    }

    /// Appends `Name: value`.
    mutating func field(_ name: String, _ value: String) {
        HeadSerializer.appendField(name, value, to: &bytes)
    }

    /// Appends fields already in wire form (a response's own, hop-by-hop ones removed).
    mutating func fields(_ headers: HTTPHeaders) {
        HeadSerializer.appendFields(headers, to: &bytes)
    }

    /// Appends field lines already serialized (a stored response's).
    mutating func fields(wire: ArraySlice<UInt8>) {
        bytes.append(contentsOf: wire)
    }

    /// Appends `Via` (RFC 9110 §7.6.3), as every response that passed through Larder carries.
    mutating func via() {
        bytes.append(contentsOf: StoredResponse.viaLine)
    }

    /// Appends the `Cache-Status` field.
    mutating func cacheStatus(_ status: CacheStatus) {
        status.appendField(to: &bytes)
    }

    /// Ends a final head: the framing field, `Connection`, the blank line, written on the
    /// stack and appended in one copy (no array of their own, no room zeroed in the head's).
    mutating func end(length: Int?, chunked: Bool = false, connection: ConnectionField) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.endCapacity) { buffer in
            var writer = ByteWriter(buffer)
            Self.writeEnd(length: length, chunked: chunked, connection: connection, into: &writer)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<writer.count]))
        }
    }

    /// Ends an interim head (RFC 9110 §15.2), which has no framing and says nothing of the
    /// connection, and returns it.
    consuming func interim() -> [UInt8] {
        bytes.append(contentsOf: HeadSerializer.crlf)
        return bytes
    }

    /// `100 Continue`, for a client waiting to send its body (RFC 9110 §10.1.1).
    static let continueHead = ResponseHeadWriter(status: 100, reason: "Continue", capacity: 32).interim()

    /// CONNECT's `200 Connection established`: the tunnel starts after it and the head has no
    /// framing (RFC 9110 §9.3.6).
    static let connectionEstablished = ResponseHeadWriter(status: 200, reason: "Connection established", capacity: 48).interim()

    /// The most bytes ``writeEnd(length:chunked:connection:into:)`` writes.
    static let endCapacity = 64

    /// Writes a final head's last lines in place: `Content-Length` (or `Transfer-Encoding:
    /// chunked`), the `Connection` field (RFC 9112 §9.3), and the blank line. A stored hit's
    /// head ends here, in the loop's scratch buffer, without an array of its own.
    @inline(__always)
    static func writeEnd(length: Int?, chunked: Bool, connection: ConnectionField, into writer: inout ByteWriter) {
        if let length {
            writer.append("Content-Length: " as StaticString)
            writer.append(decimal: length)
            writer.append("\r\n" as StaticString)
        } else if chunked {
            writer.append("Transfer-Encoding: chunked\r\n" as StaticString)
        }
        switch connection {
        case .none: break
        case .close: writer.append("Connection: close\r\n" as StaticString)
        case .keepAlive: writer.append("Connection: keep-alive\r\n" as StaticString)
        }
        writer.append("\r\n" as StaticString)
    }
}

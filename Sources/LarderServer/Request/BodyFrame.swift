import LarderHTTP

/// How body bytes a writer has go on the wire under the framing the response head announced:
/// a pure value the connection applies to every part a body writer (a fill's reader, the
/// slice walk, the disk body) sends (``ClientConnection/sendBodyPart(_:from:count:exchange:)``).
/// A body never runs past the Content-Length its head declared (RFC 9112 §6.3): the bytes that
/// would are dropped, and ``overran`` says so (the connection logs it once and closes after
/// what was declared). A chunked body sends each write as a chunk of its own (RFC 9112 §7.1), never
/// one of size 0, which would end the body.
struct BodyFrame: Equatable {
    /// The bytes that go: all those asked, or what the declared length leaves of them; 0
    /// when the response has no body.
    let count: Int
    /// Whether the bytes asked ran past the declared length.
    let overran: Bool
    /// Whether the bytes go as a chunk: ``sizeLine`` before them, CRLF after.
    let chunked: Bool

    /// The frame for `count` bytes under `framing`, `sent` body bytes already sent.
    init(count: Int, framing: ResponseFraming, sent: Int) {
        switch framing {
        case .none:
            self.count = 0
            overran = false
            chunked = false
        case .length(let declared):
            overran = sent + count > declared
            self.count = overran ? max(0, declared - sent) : count
            chunked = false
        case .chunked:
            self.count = count
            overran = false
            chunked = count > 0
        case .close:
            self.count = count
            overran = false
            chunked = false
        }
    }

    /// The chunk-size line in front of a chunk's bytes.
    var sizeLine: [UInt8] {
        var line: [UInt8] = []
        HeadSerializer.appendChunkSize(count, to: &line)
        return line
    }
}

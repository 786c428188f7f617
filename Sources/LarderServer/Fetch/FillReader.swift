import LarderHTTP

/// A reader of a fill: a client connection streaming the response out.
protocol FillReader: AnyObject {
    /// The fill has a head, more body, or an end; called once after each batch of transfer
    /// events. The reader takes what it can send now and returns the body position it got
    /// to (which the fill records, then trims and resumes once for all its readers), or nil
    /// when it is no longer attached.
    func fillDidProgress(_ fill: Fill) -> Int?
    /// The origin sent an interim (1xx) response before its final head: pass it on, or not.
    func fillDidReceiveInterim(_ fill: Fill, head: ResponseHead)
    /// The response may not go to this reader; the fill has already forgotten it.
    func fillReleased(_ fill: Fill, reason: FillRelease)
    /// Of the body up to `position` (what this reader took), the bytes its client has really
    /// received: less what still waits in the reader's own queue and the socket's (nil: it
    /// cannot tell). Asked only when a paused transfer may be cut (``HeldTransfers``).
    func delivered(upTo position: Int) -> Int?
}

extension FillReader {
    func delivered(upTo position: Int) -> Int? { nil }
}

/// Why a reader was let go by a fill.
enum FillRelease {
    /// The response may not be shared at all: fetch alone.
    case notShareable
    /// The reader's request selects another variant (these Vary fields): share a fill with
    /// readers of that variant.
    case otherVariant([String])
    /// The reader asked for a range of an object too large (or uncacheable) to fetch whole:
    /// send the Range upstream.
    case passRange
    /// The reader fell ``FillBuffer/highWater`` behind a body with no disk copy while another
    /// kept up: the transfer would have paused for it, holding up every other reader.
    case fellBehind
    /// The transfer waited ``HeldTransfers/holdLimit`` for its readers while other requests
    /// waited for a connection to its origin: it was cut to free its connection.
    case heldConnection
    /// The transfer's client held more of its origin's connections than another that waited
    /// ``HeldTransfers/holdLimit`` for one: it was cut to free its connection
    /// (``HeldTransfers/overShare(_:fewest:now:held:anyRate:)``).
    case overShare
}

import LarderCache

/// An exchange's hold on the fill it reads, carried by the state that reads it
/// (``Exchange/State/readingFill(_:)``, ``Exchange/State/responding(_:)``, or a sliced
/// answer's ``Exchange/SliceProgress``): where the client is in the body, and the block of the
/// fill's disk file it waits for or holds. Leaving the fill drops all of it at once.
///
/// A class, one per attachment (a miss's, never a hit's): the reader moves its position in
/// place on every batch, where a value in the state's payload would be copied out and back.
///
/// State: owned by its exchange, on the connection's loop.
final class FillAttachment {
    let fill: Fill
    /// When it attached (for coalesce.wait_timeout).
    let since: UInt64
    /// The next body byte to queue.
    var position = 0
    /// Within a slice fill: where the client's bytes end (nil until its head was checked).
    var sliceEnd: Int?
    /// A block of the fill's disk file being read and checked on the reader thread, for a
    /// client that fell behind the fill's memory: the parking token its answer comes back with,
    /// and the block.
    var blockRead: (token: Int, block: FillData.Block)?
    /// Such a block once checked: the body position of its first byte and its bytes, queued as
    /// the client gets to them.
    var checkedBlock: (start: Int, bytes: [UInt8])?
    /// The upstream transfer asked for request body bytes that had not arrived yet; the next
    /// read from the client resumes it.
    var bodyWanted = false

    /// A block is being read for it.
    var isReadingBlock: Bool {
        if case .some = blockRead { return true }
        return false
    }

    init(_ fill: Fill, since: UInt64) {
        self.fill = fill
        self.since = since
    }
}

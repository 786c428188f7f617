import LarderCache

/// Where a response's body from the disk tier is, when that body is over one block: each block
/// is read and checked on the disk tier's reader thread, and only its checked bytes are queued
/// (DISK-FORMAT.md, "Life of an entry"). The reader checks the next block while the socket
/// takes the one before: a block is asked for once at most ``DiskEntryFormat/blockSize`` bytes
/// wait in the output, so a connection holds about two blocks at most, however slowly its
/// client reads. A value owned by its exchange, on its connection's loop.
struct DiskBodyStream {
    /// The stored response; its body is a file range.
    let stored: StoredResponse
    /// The next body byte to queue, and the end of those to send.
    private(set) var next: Int
    let end: Int
    /// The block being read on the reader thread (the parking token its answer comes back
    /// with), if one is.
    var reading: Int?

    init(stored: StoredResponse, first: Int, count: Int) {
        self.stored = stored
        next = first
        end = first + count
    }

    /// Every byte is queued.
    var isDone: Bool { next >= end }

    /// The block to read next, when none is being read and the output (`pendingOutput` bytes
    /// waiting) has room for it; nil otherwise.
    func blockToRead(pendingOutput: Int) -> Int? {
        guard reading == nil, !isDone, pendingOutput <= DiskEntryFormat.blockSize else { return nil }
        return next / DiskEntryFormat.blockSize
    }

    /// Takes checked block `block` (of `count` bytes): the part of it to queue, as an offset in
    /// it and a byte count, and moves on past that part.
    mutating func take(block: Int, count: Int) -> (offset: Int, count: Int) {
        let start = block * DiskEntryFormat.blockSize
        let offset = next - start
        precondition(offset >= 0 && offset < count, "block \(block) does not hold byte \(next)")
        let taken = min(count - offset, end - next)
        next += taken
        return (offset, taken)
    }
}

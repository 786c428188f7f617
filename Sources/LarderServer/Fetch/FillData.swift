import LarderCache
import LarderIO

/// Where a reader finds the body bytes at its position.
enum FillData {
    /// A chunk in memory and the offset of the position inside it.
    case memory([UInt8], offset: Int)
    /// A block of the disk tier's file being written (the reader fell behind what is kept in
    /// memory): read whole and checked against the checksum its write published before any of
    /// it is sent, never sent from the file as it is (DESIGN.md: every byte served from disk
    /// is checked first).
    case block(Block)
    /// Dropped from memory, and its disk file can no longer give it back (a block failed its
    /// check and the entry was dropped, or the write failed): a reader here cannot go on.
    case lost

    typealias Block = DiskWrite.ReadableBlock
}

/// Checksums per block (formats 4 and 5): a body over one block (``blockSize``) is followed by a table
/// holding each block's ``BodyChecksum``, eight bytes little-endian a block, in order. A body
/// of at most one block has no table: its body checksum is its one block's. So a large body is
/// checked block by block as it is read, and a block goes out only once it is checked
/// (DISK-FORMAT.md, "Checksums per block"). The table follows the body because a streamed
/// write learns the body's length, and so the table's place, only when the body ends; the
/// fixed-width preamble's `body-length` says where it starts.
extension DiskEntryFormat {
    /// Bytes a block: a hit on a large entry holds at most about two of them in memory.
    public static let blockSize = 1 << 20
    /// The first format with block tables.
    public static let firstBlockedVersion = 4

    /// The blocks a body of `bodyLength` bytes is cut into (the last one may be short).
    public static func blockCount(bodyLength: Int64) -> Int {
        Int((bodyLength + Int64(blockSize) - 1) / Int64(blockSize))
    }

    /// The length of the block table after a body of `bodyLength` bytes in format `version`.
    public static func tableLength(bodyLength: Int64, version: Int) -> Int64 {
        guard version >= firstBlockedVersion, bodyLength > Int64(blockSize) else { return 0 }
        return Int64(blockCount(bodyLength: bodyLength)) * 8
    }

    /// Whether a body must be checked block by block: one over a block from format 4. Others are
    /// read and checked whole (at most a block), or, over a block in an older format, cannot be
    /// served (``Problem/unblockedLargeBody(version:)``).
    public static func isBlocked(bodyLength: Int64, version: Int) -> Bool {
        tableLength(bodyLength: bodyLength, version: version) > 0
    }

    /// The body bytes of block `block`.
    public static func blockRange(_ block: Int, bodyLength: Int64) -> Range<Int64> {
        let start = Int64(block) * Int64(blockSize)
        return start..<min(start + Int64(blockSize), bodyLength)
    }

    /// The blocks that hold body bytes `first...last`.
    public static func blocks(first: Int64, last: Int64) -> ClosedRange<Int> {
        Int(first / Int64(blockSize))...Int(last / Int64(blockSize))
    }

    /// The checksum of one block's bytes in format `version` (the entry's).
    public static func blockChecksum(_ bytes: UnsafeRawBufferPointer, version: Int = DiskEntryFormat.version) -> UInt64 {
        var checksum = BodyChecksum(entryVersion: version)
        checksum.update(bytes)
        return checksum.value
    }

    /// The block table of `body` in format `version`: empty for a body of at most one block.
    public static func blockTable(of body: [UInt8], version: Int = DiskEntryFormat.version) -> [UInt8] {
        var checksums = BlockChecksums(version: version)
        checksums.update(body)
        return checksums.table
    }

    /// Block `block`'s checksum from a table (or the part of one starting at that block's
    /// entry); nil when the bytes are too few.
    public static func blockChecksum(inTable table: ArraySlice<UInt8>, at block: Int) -> UInt64? {
        let start = table.startIndex + block * 8
        guard block >= 0, start + 8 <= table.endIndex else { return nil }
        var value: UInt64 = 0
        for byte in table[start..<(start + 8)].reversed() { value = value << 8 | UInt64(byte) }
        return value
    }

    /// Checks `bytes` as block `block` against the checksum the table of an entry in format
    /// `version` holds for it.
    public static func checkBlock(
        _ bytes: [UInt8], block: Int, expected: UInt64, version: Int = DiskEntryFormat.version
    ) throws(Problem) {
        let actual = bytes.withUnsafeBytes { blockChecksum($0, version: version) }
        guard actual == expected else { throw .blockChecksumMismatch(block: block) }
    }
}

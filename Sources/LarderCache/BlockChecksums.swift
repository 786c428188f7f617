/// The block table of a body fed in chunks of any size (a streamed write's): each whole
/// ``DiskEntryFormat/blockSize`` block's checksum as it completes, the last (short) one at
/// ``table``. A value type, owned by whoever feeds it.
public struct BlockChecksums: Sendable {
    private let version: Int
    private var current: BodyChecksum
    private var filled = 0
    private var length: Int64 = 0
    private var entries: [UInt8] = []

    /// The table of an entry in format `version` (the one written, unless a head is rewritten
    /// over an older entry's body).
    public init(version: Int = DiskEntryFormat.version) {
        self.version = version
        current = BodyChecksum(entryVersion: version)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        while index < bytes.count {
            let taken = min(bytes.count - index, DiskEntryFormat.blockSize - filled)
            current.update(UnsafeRawBufferPointer(rebasing: bytes[index..<(index + taken)]))
            filled += taken
            index += taken
            if filled == DiskEntryFormat.blockSize { closeBlock() }
        }
        length += Int64(bytes.count)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The table for everything fed so far: empty when that is at most one block.
    public var table: [UInt8] {
        guard length > Int64(DiskEntryFormat.blockSize) else { return [] }
        var copy = self
        if copy.filled > 0 { copy.closeBlock() }
        return copy.entries
    }

    /// Blocks whose checksums are final: every whole block fed so far.
    public var completedBlocks: Int { entries.count / 8 }

    /// The checksum of completed block `block`.
    public func checksum(ofBlock block: Int) -> UInt64 {
        DiskEntryFormat.blockChecksum(inTable: entries[...], at: block)!
    }

    /// The checksum of the short block fed since the last whole one, if any: the last block,
    /// once the body is complete.
    public var partialBlockChecksum: UInt64? { filled > 0 ? current.value : nil }

    private mutating func closeBlock() {
        var value = current.value
        for _ in 0..<8 {
            entries.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
        }
        current = BodyChecksum(entryVersion: version)
        filled = 0
    }
}

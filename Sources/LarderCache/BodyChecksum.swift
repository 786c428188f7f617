import CChecksum

/// A streaming 64-bit checksum of a body, fed in chunks of any size; it detects truncation and
/// flipped bits, not deliberate forgery.
///
/// Three kinds, by disk entry format (DISK-FORMAT.md, "Checksums"): format 5 is CRC-64/XZ, run
/// in C by carry-less multiplication where the CPU has it (``CChecksum``); formats 3 and 4 keep
/// four states, one for each word of a 32-byte block, each step mixing an eight-byte word in
/// with one 64×64→128-bit multiply, its halves folded (in the manner of wyhash); format 2 has
/// one such chain. 2 to 4 are kept to read entries written by an older Larder; they finish the
/// same way: what is left, the length, then a finalizer.
public struct BodyChecksum: Sendable {
    private static let multiplier: UInt64 = 0xa076_1d64_78bd_642f
    private static let seed: UInt64 = 0x243f_6a88_85a3_08d3
    private static let laneSeedStep: UInt64 = 0x9e37_79b9_7f4a_7c15
    private static let partialWordMark: UInt64 = 0xe703_7ed1_a0b4_28db

    private enum Kind { case chain, lanes, crc }

    // The four lanes' states are kept apart in memory, other fields between them: stored side
    // by side, LLVM's SLP vectorizer packs two of them into one vector register and puts a
    // move between registers into each multiply chain, which costs more than half the speed.
    // Format 5 keeps its CRC in `state`.
    private var state: UInt64
    private var length: UInt64 = 0
    private var lane1: UInt64 = seed &+ laneSeedStep
    private var pendingCount = 0
    private var lane2: UInt64 = seed &+ 2 &* laneSeedStep
    /// Bytes not yet absorbed, little-endian: up to a block (formats 3-4) or a word (format 2).
    private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var lane3: UInt64 = seed &+ 3 &* laneSeedStep
    private let kind: Kind

    /// The checksum of the current entry format (``DiskEntryFormat/version``).
    public init() { self.init(entryVersion: DiskEntryFormat.version) }

    /// The checksum of entry format `version` (2 to 5; see ``DiskEntryFormat/readableVersions``).
    public init(entryVersion version: Int) {
        precondition(DiskEntryFormat.readableVersions.contains(version), "no checksum for entry format \(version)")
        kind = version >= 5 ? .crc : version >= 3 ? .lanes : .chain
        state = kind == .crc ? 0 : Self.seed
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch kind {
        case .crc: state = larder_crc64(state, bytes.baseAddress, bytes.count)
        case .lanes:
            length &+= UInt64(bytes.count)
            updateLanes(bytes)
        case .chain:
            length &+= UInt64(bytes.count)
            updateChain(bytes)
        }
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The checksum of everything fed so far.
    public var value: UInt64 {
        if kind == .crc { return state }
        var state = state
        var pending = pending
        let whole = pendingCount / 8
        let partial = pendingCount % 8 > 0
        withUnsafeBytes(of: &pending) { pending in
            if kind == .lanes {
                // The lanes fold into one state; the last block's whole words follow it.
                state = Self.absorb(state, lane1)
                state = Self.absorb(state, lane2)
                state = Self.absorb(state, lane3)
                for word in 0..<whole { state = Self.absorb(state, pending.load(fromByteOffset: word * 8, as: UInt64.self)) }
            }
            if partial {
                state = Self.absorb(state, pending.load(fromByteOffset: whole * 8, as: UInt64.self) ^ Self.partialWordMark)
            }
        }
        return StableHash.mix(Self.absorb(state, length))
    }

    /// The checksum as 16 hex digits.
    public var hex: String { StableHash.hex64(value) }

    @inline(__always)
    private static func absorb(_ state: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = (state ^ word).multipliedFullWidth(by: multiplier)
        return mixed.high ^ mixed.low
    }

    /// Formats 3 and 4: 32-byte blocks, word `i` of each into lane `i`.
    private mutating func updateLanes(_ bytes: UnsafeRawBufferPointer) {
        var index = fillPending(from: bytes, upTo: 32)
        if pendingCount == 32 {
            state = Self.absorb(state, pending.0)
            lane1 = Self.absorb(lane1, pending.1)
            lane2 = Self.absorb(lane2, pending.2)
            lane3 = Self.absorb(lane3, pending.3)
            pending = (0, 0, 0, 0)
            pendingCount = 0
        } else if pendingCount > 0 {
            return
        }
        let count = bytes.count
        var (s0, s1, s2, s3) = (state, lane1, lane2, lane3)
        while index + 32 <= count {
            s0 = Self.absorb(s0, bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            s1 = Self.absorb(s1, bytes.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self))
            s2 = Self.absorb(s2, bytes.loadUnaligned(fromByteOffset: index + 16, as: UInt64.self))
            s3 = Self.absorb(s3, bytes.loadUnaligned(fromByteOffset: index + 24, as: UInt64.self))
            index += 32
        }
        (state, lane1, lane2, lane3) = (s0, s1, s2, s3)
        index = fillPending(from: bytes, at: index, upTo: 32)
        precondition(index == count)
    }

    /// Format 2: one chain, a word at a time.
    private mutating func updateChain(_ bytes: UnsafeRawBufferPointer) {
        var index = fillPending(from: bytes, upTo: 8)
        if pendingCount == 8 {
            state = Self.absorb(state, pending.0)
            pending.0 = 0
            pendingCount = 0
        } else if pendingCount > 0 {
            return
        }
        let count = bytes.count
        // In a local: through `self` the state went to memory and back at every step.
        var chain = state
        while index + 8 <= count {
            chain = Self.absorb(chain, bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            index += 8
        }
        state = chain
        index = fillPending(from: bytes, at: index, upTo: 8)
        precondition(index == count)
    }

    /// Copies bytes from `bytes[index...]` into ``pending`` while it holds less than `limit`
    /// (only when it holds some already, or when what is left is less than `limit`); returns
    /// the index of the first byte not copied.
    private mutating func fillPending(from bytes: UnsafeRawBufferPointer, at index: Int = 0, upTo limit: Int) -> Int {
        let left = bytes.count - index
        guard left > 0, pendingCount > 0 || left < limit else { return index }
        let taken = min(left, limit - pendingCount)
        let start = pendingCount
        withUnsafeMutableBytes(of: &pending) { pending in
            pending.baseAddress!.advanced(by: start).copyMemory(from: bytes.baseAddress!.advanced(by: index), byteCount: taken)
        }
        pendingCount += taken
        return index + taken
    }
}

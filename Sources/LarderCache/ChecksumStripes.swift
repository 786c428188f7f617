import CStripes

/// Entry format 5's checksum state before its finish (DISK-FORMAT.md, "Checksums"): two sets
/// of eight 64-bit sums fed 64-byte stripes, each word keyed twice by its place, through the
/// vector loop of CStripes; and the bytes of a stripe not yet whole. ``BodyChecksum`` folds it.
struct ChecksumStripes: Sendable {
    static let stripeLength = 64
    private static let seed: UInt64 = 0x243f_6a88_85a3_08d3
    private static let laneSeedStep: UInt64 = 0x9e37_79b9_7f4a_7c15

    /// The first set's sums, then the second's.
    private(set) var sums: Sums
    /// Stripes absorbed so far: the next one's number, which keys its words.
    private var stripes: UInt64 = 0
    /// Bytes of the stripe not yet whole, as they came; zero past ``pendingCount``.
    private(set) var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private(set) var pendingCount = 0
    /// Whether the stripes go through the loop built without AVX2 (tests compare the two).
    private let portable: Bool

    typealias Sums = (
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
    )

    init(portable: Bool = false) {
        // Sum i (of the sixteen) starts at seed + i × step.
        sums = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &sums) { sums in
            for index in 0..<16 {
                sums.storeBytes(of: Self.seed &+ UInt64(index) &* Self.laneSeedStep, toByteOffset: index * 8, as: UInt64.self)
            }
        }
        self.portable = portable
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var index = 0
        if pendingCount > 0 {
            index = min(bytes.count, Self.stripeLength - pendingCount)
            keep(UnsafeRawBufferPointer(start: base, count: index))
            guard pendingCount == Self.stripeLength else { return }
            withUnsafeBytes(of: pending) { absorb($0.baseAddress!, count: 1) }
            pending = (0, 0, 0, 0, 0, 0, 0, 0)
            pendingCount = 0
        }
        let whole = (bytes.count - index) / Self.stripeLength
        if whole > 0 {
            absorb(base + index, count: whole)
            index += whole * Self.stripeLength
        }
        if index < bytes.count { keep(UnsafeRawBufferPointer(start: base + index, count: bytes.count - index)) }
    }

    private mutating func keep(_ bytes: UnsafeRawBufferPointer) {
        let start = pendingCount
        withUnsafeMutableBytes(of: &pending) { pending in
            pending.baseAddress!.advanced(by: start).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        }
        pendingCount += bytes.count
    }

    private mutating func absorb(_ bytes: UnsafeRawPointer, count: Int) {
        let first = stripes
        let portable = portable
        withUnsafeMutableBytes(of: &sums) { sums in
            let sums = sums.baseAddress!.assumingMemoryBound(to: UInt64.self)
            if portable {
                larder_stripes_absorb_portable(sums, first, bytes, count)
            } else {
                larder_stripes_absorb(sums, first, bytes, count)
            }
        }
        stripes &+= UInt64(count)
    }

    /// Whether this CPU runs the stripes through the AVX2 loop.
    static var isVectorized: Bool { larder_stripes_vectorized() != 0 }
}

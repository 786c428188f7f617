/// A streaming 64-bit checksum of a body, fed in chunks of any size. It consumes eight bytes per
/// step (multiply-xorshift, in the manner of wyhash's mixing), so checking a multi-megabyte
/// body costs milliseconds; it detects truncation and flipped bits, not deliberate forgery.
public struct BodyChecksum: Sendable {
    private var state: UInt64 = 0x243f_6a88_85a3_08d3
    private var carry: UInt64 = 0
    private var carryCount = 0
    private var length: UInt64 = 0

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        let count = bytes.count
        length &+= UInt64(count)
        // Finish a partial word left from the previous chunk.
        while carryCount > 0 && carryCount < 8 && index < count {
            carry |= UInt64(bytes[index]) << (UInt64(carryCount) * 8)
            carryCount += 1
            index += 1
        }
        if carryCount == 8 {
            absorb(carry)
            carry = 0
            carryCount = 0
        }
        while index + 8 <= count {
            absorb(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            index += 8
        }
        while index < count {
            carry |= UInt64(bytes[index]) << (UInt64(carryCount) * 8)
            carryCount += 1
            index += 1
        }
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    @inline(__always)
    private mutating func absorb(_ word: UInt64) {
        let mixed = (state ^ word).multipliedFullWidth(by: 0xa076_1d64_78bd_642f)
        state = mixed.high ^ mixed.low
    }

    /// The checksum of everything fed so far.
    public var value: UInt64 {
        var copy = self
        if copy.carryCount > 0 { copy.absorb(copy.carry ^ 0xe703_7ed1_a0b4_28db) }
        copy.absorb(copy.length)
        return StableHash.mix(copy.state)
    }

    /// The checksum as 16 hex digits.
    public var hex: String { StableHash.hex64(value) }
}

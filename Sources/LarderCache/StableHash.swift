/// A 128-bit hash of a string that is the same in every run (Swift's `Hasher` is seeded per
/// process), used to name disk-cache files. Not cryptographic: every file also records its full
/// key, and a lookup that finds another key in the file treats it as a miss.
public enum StableHash {
    /// 32 lower-case hex digits.
    public static func hex(_ text: String) -> String {
        EntryName(hashing: text).description
    }

    /// The hash's two words, high first.
    static func words(_ text: String) -> (high: UInt64, low: UInt64) {
        var first: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a offset basis
        var second: UInt64 = 0x9e37_79b9_7f4a_7c15
        func add(_ byte: UInt8) {
            first = (first ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            second = (second ^ UInt64(byte)) &* 0xbf58_476d_1ce4_e5b9
            second ^= second >> 31
        }
        // The bytes in place when the string has them contiguous (native strings do): walking
        // the UTF-8 view index by index cost as much as the hashing.
        let inPlace: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes { add(byte) }
        }
        if inPlace == nil {
            for byte in text.utf8 { add(byte) }
        }
        return (mix(first), mix(second ^ first))
    }

    static func mix(_ value: UInt64) -> UInt64 {
        var x = value
        x ^= x >> 30
        x = x &* 0xbf58_476d_1ce4_e5b9
        x ^= x >> 27
        x = x &* 0x94d0_49bb_1331_11eb
        x ^= x >> 31
        return x
    }

    static func hex64(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            writeHex(value, into: buffer)
            return 16
        }
    }

    /// 16 lower-case hex digits of `value` into `buffer` (written in place: this names every
    /// file the disk tier stores, on its writer thread, and spells both checksums of every
    /// entry's preamble). Eight digits at a time, each word's nibbles spread into bytes.
    static func writeHex(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        precondition(buffer.count >= 16)
        let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
        raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value >> 32)).bigEndian, as: UInt64.self)
        raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value)).bigEndian, toByteOffset: 8, as: UInt64.self)
    }

    /// The eight lower-case hex digits of `value` as the bytes of a word, the last digit in
    /// its lowest byte (stored big-endian, they read first digit first).
    @inline(__always)
    static func hexDigits(_ value: UInt32) -> UInt64 {
        // Nibble i of `value` into byte i.
        var nibbles = UInt64(value)
        nibbles = (nibbles | nibbles << 16) & 0x0000_FFFF_0000_FFFF
        nibbles = (nibbles | nibbles << 8) & 0x00FF_00FF_00FF_00FF
        nibbles = (nibbles | nibbles << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // A byte's bit 4 is set after adding 6 exactly when its nibble is 10 or more: those
        // go past "9" by the 39 bytes from ":" to "a". No byte carries into the next.
        let letters = ((nibbles &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* 39
    }
}

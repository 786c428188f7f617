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
    /// file the disk tier stores, on its writer thread).
    static func writeHex(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        var remaining = value
        for index in stride(from: 15, through: 0, by: -1) {
            let digit = UInt8(remaining & 0xF)
            buffer[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            remaining >>= 4
        }
    }
}

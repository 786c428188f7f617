/// The name of a disk entry: the ``StableHash`` of its key and Vary values, 128 bits, spelled
/// as 32 lower-case hex digits where it names a file (`v1/ab/cd/<name>`).
///
/// Two words rather than the spelling: the index holds one per entry and looks entries up by
/// it, and a 32-digit String was a heap object of its own (~80 bytes an entry, hashed and
/// compared byte by byte).
public struct EntryName: Hashable, Sendable, CustomStringConvertible {
    let high: UInt64
    let low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The name of `text` (a key's URL, followed by its Vary values when it has any).
    init(hashing text: String) {
        (high, low) = StableHash.words(text)
    }

    /// The name a file is called by, if it is one: exactly 32 lower-case hex digits, as
    /// ``description`` spells them.
    init?(fileName: String) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var count = 0
        for byte in fileName.utf8 {
            guard count < 32 else { return nil }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            if count < 16 { high = high << 4 | UInt64(digit) } else { low = low << 4 | UInt64(digit) }
            count += 1
        }
        guard count == 32 else { return nil }
        self.init(high: high, low: low)
    }

    /// The 32 hex digits.
    public var description: String {
        String(unsafeUninitializedCapacity: 32) { buffer in
            write(into: buffer)
            return 32
        }
    }

    /// Writes the 32 hex digits into the first 32 bytes of `buffer`.
    func write(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        StableHash.writeHex(high, into: UnsafeMutableBufferPointer(rebasing: buffer[0..<16]))
        StableHash.writeHex(low, into: UnsafeMutableBufferPointer(rebasing: buffer[16..<32]))
    }
}

extension EntryName: ShardedKey {
    /// Both words mixed with a key drawn when the process starts: a client can choose URLs,
    /// and so names, but not which shard of the index they land in.
    var shardBits: UInt {
        UInt(truncatingIfNeeded: StableHash.mix(high ^ StableHash.mix(low ^ EntryName.shardKey)))
    }

    private static let shardKey = UInt64.random(in: .min ... .max)
}

import LarderHTTP

/// The on-disk form of one stored response (format version 5). Text up to the body, so an
/// operator can read an entry with `head -c 2000 FILE`:
///
/// ```
/// LARDER-ENTRY 5\n                              preamble: 133 bytes, fixed width
/// body-length 00000000000000012345\n            (rewritten in place when the body is complete)
/// body-checksum 0123456789abcdef\n
/// head-checksum 0123456789abcdef\n             of the head section below
/// head-length 0000000312\n
/// key http://example.org/a\n                    head: head-length bytes
/// status 200 OK\n
/// request-time 1732300000.123\n
/// response-time 1732300000.456\n
/// body-time 1732200000.789\n                    when the body arrived before (a refreshed head)
/// vary accept-encoding: gzip\n                  zero or more
/// \n
/// Content-Type: text/plain\r\n                  stored response headers, wire form
/// Cache-Control: max-age=60\r\n
/// <body: body-length bytes>
/// <block table>                                 a body over one block only (DiskEntryFormat+Blocks)
/// ```
///
/// Both checksums are ``BodyChecksum`` (64-bit) of the entry's version. A file whose size is not
/// `133 + head-length + body-length` (and, from version 4, the block table's length), whose magic
/// or version is unknown, whose head does not parse or match its checksum, or whose body (or one
/// of its blocks) does not match its checksum is corrupt: it is deleted, never served. Version 4
/// differs only in its checksums (four multiply chains instead of version 5's CRC-64), version
/// 3 also in having no block table, version 2 also in its checksums (one chain); 3 and 2 are
/// still read up to one block of body. Version 1 had no head checksum, and its entries are
/// dropped at start-up (DISK-FORMAT.md, "Versions").
public enum DiskEntryFormat {
    /// The version written.
    public static let version = 5
    /// The versions read: an entry keeps the version it was written in.
    public static let readableVersions = 2...5
    public static let magic = magicLiteral.description
    /// ``magic`` as a literal, for the preamble's writer and reader (a String's UTF-8 view is
    /// walked through the generic sequence path).
    static let magicLiteral: StaticString = "LARDER-ENTRY "
    public static let preambleLength = 133
    /// The largest `body-length` a preamble may state (1 PiB, past any disk): the field has
    /// room for 20 digits, and a value near Int64.max would overflow the record's length
    /// (preamble + head + body + block table) the moment it is computed. A preamble is read
    /// before any checksum can vouch for it.
    public static let maxBodyLength: Int64 = 1 << 50

    /// What the head of an entry file says.
    public struct Head: Sendable, Equatable {
        public var key: String
        public var status: Int
        public var reason: String
        public var requestTime: Double
        public var responseTime: Double
        public var vary: [String: String]
        public var headers: HTTPHeaders
        public var bodyLength: Int64
        public var bodyChecksum: UInt64
        /// The format version the entry was written in, which chose its checksums: a head
        /// rewritten over an old body keeps it.
        public var version: Int
        /// The bytes of the block table after the body.
        public var tableLength: Int64 { DiskEntryFormat.tableLength(bodyLength: bodyLength, version: version) }
        /// When the body arrived: ``bodyTime``, or with the response.
        public var bodyArrival: Double { bodyTime ?? responseTime }
        /// The URL the entry was fetched from, when its key is not the URL (a `url` line).
        public var url: String? { rare?.url }
        /// When the body arrived, if before `responseTime`: a head a refresh rewrote over the
        /// body of an earlier fill (``StoredResponse/bodyTime``; no `body-time` line otherwise).
        public var bodyTime: Double? { rare?.bodyTime }
        /// The fields few heads have, boxed: a head stays within the 128 bytes a copy of it is
        /// made inline in (a fill moves its head several times; past that, each is a call).
        private let rare: Rare?

        /// ``url`` and ``bodyTime``, when either is there.
        private final class Rare: Sendable, Equatable {
            let url: String?
            let bodyTime: Double?

            init(url: String?, bodyTime: Double?) {
                self.url = url
                self.bodyTime = bodyTime
            }

            static func == (first: Rare, second: Rare) -> Bool {
                first.url == second.url && first.bodyTime == second.bodyTime
            }
        }

        public init(
            key: String, status: Int, reason: String, requestTime: Double, responseTime: Double, bodyTime: Double? = nil,
            vary: [String: String], headers: HTTPHeaders, bodyLength: Int64 = 0, bodyChecksum: UInt64 = 0,
            version: Int = DiskEntryFormat.version, url: String? = nil
        ) {
            self.key = key
            self.status = status
            self.reason = reason
            self.requestTime = requestTime
            self.responseTime = responseTime
            let bodyTime = bodyTime.flatMap { StoredResponse.sameArrival($0, responseTime) ? nil : $0 }
            rare = url == nil && bodyTime == nil ? nil : Rare(url: url, bodyTime: bodyTime)
            self.vary = vary
            self.headers = headers
            self.bodyLength = bodyLength
            self.bodyChecksum = bodyChecksum
            self.version = version
        }
    }

    /// Why an entry cannot be used.
    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case unknownFormat
        case unknownVersion(Int)
        case unreadableHead(String)
        case truncated(expected: Int64, actual: Int64)
        case checksumMismatch
        case headChecksumMismatch
        case keyMismatch
        /// Block `block` of the body does not match its checksum in the block table.
        case blockChecksumMismatch(block: Int)
        /// A body over one block in a version without block checksums (before 4): it cannot be
        /// checked as it is sent, so it is dropped as an entry of an older format, not as damage.
        case unblockedLargeBody(version: Int)

        /// Whether the entry is only of a format this Larder no longer serves (not damage).
        public var isOlderFormat: Bool {
            switch self {
            case .unknownVersion(let version): version < DiskEntryFormat.readableVersions.lowerBound
            case .unblockedLargeBody: true
            default: false
            }
        }

        public var description: String {
            switch self {
            case .unknownFormat: "not a Larder cache entry"
            case .unknownVersion(let version): "unknown format version \(version)"
            case .unreadableHead(let detail): "unreadable head (\(detail))"
            case .truncated(let expected, let actual): "size \(actual) bytes, expected \(expected)"
            case .checksumMismatch: "body checksum mismatch"
            case .headChecksumMismatch: "head checksum mismatch"
            case .keyMismatch: "entry belongs to another key"
            case .blockChecksumMismatch(let block): "checksum mismatch in body block \(block)"
            case .unblockedLargeBody(let version): "format \(version) has no block checksums for a body over one block"
            }
        }
    }

    /// Preamble and head of an entry in one buffer, ready to be written before the body (one
    /// array: the disk tier builds this for every miss it stores), in `head.version`, whose
    /// checksum `bodyChecksum` must be. `wireFields`, when given, are `head.headers` already in
    /// wire form (a stored response's), copied as they are.
    public static func entryHead(
        _ head: Head, wireFields: ArraySlice<UInt8>? = nil, bodyLength: Int64, bodyChecksum: UInt64
    ) -> [UInt8] {
        // Most responses have no Vary values: sorting an empty dictionary still allocates.
        let vary = head.vary.isEmpty ? [] : head.vary.sorted { $0.key < $1.key }
        var varyBytes = 0
        for (name, value) in vary { varyBytes += 8 + name.utf8.count + value.utf8.count }
        // Room for every text at its UTF-8 length (a Latin-1 reason or value takes a byte a
        // scalar: no more), 20 digits for the status and 24 characters for each time.
        let capacity =
            preambleLength + 64 + 20 + 48 + (head.bodyTime == nil ? 0 : 35) + head.key.utf8.count
            + (head.url.map { $0.utf8.count + 5 } ?? 0) + head.reason.utf8.count
            + varyBytes
            + (wireFields?.count ?? head.headers.wire.count)
        return ByteArrays.make(capacity: capacity) { buffer in
            var writer = ByteWriter(UnsafeMutableBufferPointer(rebasing: buffer[preambleLength...]))
            writeHead(head, vary: vary, wireFields: wireFields, into: &writer)
            let section = UnsafeMutableBufferPointer(rebasing: buffer[preambleLength..<(preambleLength + writer.count)])
            writePreamble(
                version: head.version, bodyLength: bodyLength, bodyChecksum: bodyChecksum,
                headChecksum: headChecksum(of: UnsafeRawBufferPointer(section), version: head.version), headLength: writer.count,
                into: UnsafeMutableBufferPointer(rebasing: buffer[0..<preambleLength]))
            return preambleLength + writer.count
        }
    }

    /// The checksum of a head section (what follows the preamble, up to the body) in format
    /// `version`.
    public static func headChecksum(of head: ArraySlice<UInt8>, version: Int = DiskEntryFormat.version) -> UInt64 {
        head.withUnsafeBytes { headChecksum(of: $0, version: version) }
    }

    static func headChecksum(of head: UnsafeRawBufferPointer, version: Int) -> UInt64 {
        var checksum = BodyChecksum(entryVersion: version)
        checksum.update(head)
        return checksum.value
    }

    /// A time in seconds to the microsecond (`1764139200.123456`), which `Double(_:)` reads
    /// back, without `Double.description`'s search for the shortest round-trip digits.
    /// At most 24 bytes.
    static func appendSeconds(_ seconds: Double, to writer: inout ByteWriter) {
        guard seconds.isFinite, seconds >= 0, seconds < 1e12 else {
            writer.append(seconds.description)
            return
        }
        let micros = Int((seconds * 1_000_000).rounded())
        let (whole, fraction) = micros.quotientAndRemainder(dividingBy: 1_000_000)
        // The last eight digits of the whole seconds (a time since 1970 has ten) in one piece.
        let (high, low) = whole.quotientAndRemainder(dividingBy: 100_000_000)
        if (10..<100).contains(high) {
            // A time of ten digits (2001 to 2286): its 17 bytes put together in three words and
            // copied at once. Each store overwrites what the one before put past its place.
            var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
            withUnsafeMutableBytes(of: &text) { bytes in
                bytes.storeBytes(of: eightDigits(UInt32(truncatingIfNeeded: fraction)).littleEndian, toByteOffset: 9, as: UInt64.self)
                bytes.storeBytes(of: eightDigits(UInt32(truncatingIfNeeded: low)).littleEndian, toByteOffset: 2, as: UInt64.self)
                bytes.storeBytes(of: UInt8(ascii: "."), toByteOffset: 10, as: UInt8.self)
                bytes.storeBytes(of: UInt8(truncatingIfNeeded: 48 + high / 10), toByteOffset: 0, as: UInt8.self)
                bytes.storeBytes(of: UInt8(truncatingIfNeeded: 48 + high % 10), toByteOffset: 1, as: UInt8.self)
                UnsafeRawBufferPointer(rebasing: bytes[..<17]).withMemoryRebound(to: UInt8.self) { writer.append(contentsOf: $0) }
            }
            return
        }
        if high > 0 {
            writer.append(decimal: high)
            writer.append(length: 8) { digits in
                UnsafeMutableRawPointer(digits.baseAddress!).storeBytes(
                    of: eightDigits(UInt32(truncatingIfNeeded: low)).littleEndian, as: UInt64.self)
            }
        } else {
            writer.append(decimal: low)
        }
        writer.append(UInt8(ascii: "."))
        writer.append(length: 6) { digits in
            // The last six of the fraction's eight digits (the first two are zeros).
            let word = eightDigits(UInt32(truncatingIfNeeded: fraction)) >> 16
            let raw = UnsafeMutableRawPointer(digits.baseAddress!)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: word).littleEndian, as: UInt32.self)
            raw.storeBytes(of: UInt16(truncatingIfNeeded: word >> 32).littleEndian, toByteOffset: 4, as: UInt16.self)
        }
    }

    /// The eight decimal digits of `value` (under 10^8, zero-padded) as the bytes of a word,
    /// the first digit in its lowest byte: four digits in each half of the word, then two in
    /// each quarter, then one in each byte, with a multiplication and a shift for each division
    /// (exact in these ranges: 10486 / 2^20 for / 100 below 10^4, 103 / 2^10 for / 10 below 100).
    @inline(__always)
    static func eightDigits(_ value: UInt32) -> UInt64 {
        let value = UInt64(value)
        let fours = (value / 10_000) | ((value % 10_000) << 32)
        let hundreds = ((fours &* 10486) >> 20) & 0x0000_007F_0000_007F
        let twos = hundreds | ((fours &- hundreds &* 100) << 16)
        let tens = ((twos &* 103) >> 10) & 0x000F_000F_000F_000F
        let ones = tens | ((twos &- tens &* 10) << 8)
        return ones | 0x3030_3030_3030_3030
    }

    /// The head section: key, status, times, the Vary values in name order, a blank line, and
    /// the fields in wire form.
    private static func writeHead(
        _ head: Head, vary: [(key: String, value: String)], wireFields: ArraySlice<UInt8>?, into writer: inout ByteWriter
    ) {
        writer.append("key " as StaticString)
        writer.append(head.key)
        if let url = head.url {
            writer.append("\nurl " as StaticString)
            writer.append(url)
        }
        writer.append("\nstatus " as StaticString)
        writer.append(decimal: head.status)
        writer.append(32)
        ASCII.appendBytes(of: head.reason, to: &writer)
        writer.append("\nrequest-time " as StaticString)
        appendSeconds(head.requestTime, to: &writer)
        writer.append("\nresponse-time " as StaticString)
        appendSeconds(head.responseTime, to: &writer)
        if let bodyTime = head.bodyTime {
            writer.append("\nbody-time " as StaticString)
            appendSeconds(bodyTime, to: &writer)
        }
        writer.append(10)
        for (name, value) in vary {
            writer.append("vary " as StaticString)
            writer.append(name)
            writer.append(": " as StaticString)
            ASCII.appendBytes(of: value, to: &writer)
            writer.append(10)
        }
        writer.append(10)
        (wireFields ?? head.headers.wire[...]).withUnsafeBufferPointer { writer.append(contentsOf: $0) }
    }

    /// The fixed-width preamble of an entry in the current ``version``.
    public static func preamble(bodyLength: Int64, bodyChecksum: UInt64, headChecksum: UInt64, headLength: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: preambleLength) { buffer, count in
            writePreamble(
                version: version, bodyLength: bodyLength, bodyChecksum: bodyChecksum, headChecksum: headChecksum, headLength: headLength,
                into: buffer)
            count = preambleLength
        }
    }

    /// Writes the preamble's `preambleLength` bytes into `buffer`.
    private static func writePreamble(
        version: Int, bodyLength: Int64, bodyChecksum: UInt64, headChecksum: UInt64, headLength: Int,
        into buffer: UnsafeMutableBufferPointer<UInt8>
    ) {
        precondition(buffer.count >= preambleLength)
        // Literals as StaticStrings, copied as bytes (not through a String's UTF-8 view).
        var writer = ByteWriter(buffer)
        writer.append(magicLiteral)
        writer.append(version, zeroPaddedTo: 1)
        writer.append("\nbody-length " as StaticString)
        writer.append(length: 20) { writeZeroPadded(Int(bodyLength), into: $0) }
        writer.append("\nbody-checksum " as StaticString)
        writer.append(length: 16) { StableHash.writeHex(bodyChecksum, into: $0) }
        writer.append("\nhead-checksum " as StaticString)
        writer.append(length: 16) { StableHash.writeHex(headChecksum, into: $0) }
        writer.append("\nhead-length " as StaticString)
        writer.append(length: 10) { writeZeroPadded(headLength, into: $0) }
        writer.append("\n" as StaticString)
        precondition(writer.count == preambleLength)
    }

    /// `value` in decimal filling `digits`, left-padded with zeros (traps if it is negative or
    /// wider), as ``ByteWriter/append(_:zeroPaddedTo:)`` writes it: the preamble's lengths are
    /// mostly leading zeros, which are filled in at once instead of divided out one by one.
    static func writeZeroPadded(_ value: Int, into digits: UnsafeMutableBufferPointer<UInt8>) {
        precondition(value >= 0)
        var rest = value
        var index = digits.count
        while rest > 0 {
            precondition(index > 0, "value wider than its field")
            index &-= 1
            let (quotient, digit) = rest.quotientAndRemainder(dividingBy: 10)
            digits[index] = UInt8(truncatingIfNeeded: 48 &+ digit)
            rest = quotient
        }
        UnsafeMutableBufferPointer(rebasing: digits[..<index]).initialize(repeating: UInt8(ascii: "0"))
    }

    /// A record's preamble: the lengths that say where its head, body and the next record start.
    public struct Preamble: Sendable, Equatable {
        public var bodyLength: Int64
        public var bodyChecksum: UInt64
        public var headChecksum: UInt64
        public var headLength: Int
        /// The record was removed from a segment file (its magic is ``freedMagic``).
        public var freed: Bool
        /// The format version, which says how the checksums were computed.
        public var version: Int = DiskEntryFormat.version
        /// Preamble, head, body and block table.
        public var recordLength: Int64 {
            Int64(preambleLength + headLength) + bodyLength + DiskEntryFormat.tableLength(bodyLength: bodyLength, version: version)
        }
    }

    /// Written over ``magic`` when a record in a segment file is removed (evicted, purged,
    /// replaced): same length, so its lengths still say where the next record starts, and the
    /// start-up scan skips it (DISK-FORMAT.md).
    public static let freedMagic = freedMagicLiteral.description
    static let freedMagicLiteral: StaticString = "LARDER-FREED "
}

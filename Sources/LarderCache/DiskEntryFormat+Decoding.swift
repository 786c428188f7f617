import Glibc
import LarderHTTP

/// Reading an entry's preamble and head, byte by byte: every disk hit and every record the
/// start-up scan reads comes through here, so it never builds Strings to split and compare
/// grapheme by grapheme.
extension DiskEntryFormat {
    /// Reads the preamble at the start of `bytes`. A freed record is an error unless
    /// `acceptingFreed` (only segment files have them).
    public static func decodePreamble(_ bytes: ArraySlice<UInt8>, acceptingFreed: Bool = false) throws(Problem) -> Preamble {
        guard bytes.count >= preambleLength else { throw .unknownFormat }
        // withUnsafeBytes rethrows untyped: the outcome comes out as a Result.
        let outcome = bytes.withUnsafeBytes { raw in
            Result { () throws(Problem) -> Preamble in
                try preamble(UnsafeRawBufferPointer(rebasing: raw[0..<preambleLength]), acceptingFreed: acceptingFreed)
            }
        }
        return try outcome.get()
    }

    private static func preamble(_ text: UnsafeRawBufferPointer, acceptingFreed: Bool) throws(Problem) -> Preamble {
        var lines = Lines(text)
        guard let first = lines.next(), let second = lines.next(), let third = lines.next(), let fourth = lines.next(),
            let fifth = lines.next()
        else { throw .unknownFormat }
        let freed = acceptingFreed && starts(first, with: freedMagicLiteral)
        guard freed || starts(first, with: magicLiteral) else { throw .unknownFormat }
        guard let version = integer(after: magicLiteral.utf8CodeUnitCount, in: first, as: Int.self) else { throw .unknownFormat }
        guard readableVersions.contains(version) else { throw .unknownVersion(version) }
        guard starts(second, with: "body-length "), let bodyLength = integer(after: 12, in: second, as: Int64.self),
            starts(third, with: "body-checksum "), let checksum = hex(after: 14, in: third),
            starts(fourth, with: "head-checksum "), let headChecksum = hex(after: 14, in: fourth),
            starts(fifth, with: "head-length "), let headLength = integer(after: 12, in: fifth, as: Int.self),
            bodyLength >= 0, bodyLength <= maxBodyLength, headLength >= 0, headLength < 1 << 20
        else { throw .unreadableHead("malformed preamble") }
        return Preamble(
            bodyLength: bodyLength, bodyChecksum: checksum, headChecksum: headChecksum, headLength: headLength, freed: freed,
            version: version)
    }

    /// Parses a head section after checking it against the preamble's head checksum.
    public static func decodeHead(_ bytes: ArraySlice<UInt8>, preamble: Preamble) throws(Problem) -> Head {
        guard headChecksum(of: bytes, version: preamble.version) == preamble.headChecksum else { throw .headChecksumMismatch }
        return try decodeHead(bytes, bodyLength: preamble.bodyLength, bodyChecksum: preamble.bodyChecksum, version: preamble.version)
    }

    /// Parses the head section of an entry in format `version`.
    public static func decodeHead(
        _ bytes: ArraySlice<UInt8>, bodyLength: Int64, bodyChecksum: UInt64, version: Int = DiskEntryFormat.version
    ) throws(Problem) -> Head {
        let outcome = bytes.withUnsafeBytes { raw in
            Result { () throws(Problem) -> (Meta, Int) in
                guard let blank = findBlankLine(raw) else { throw .unreadableHead("no end of metadata") }
                return (try Meta(UnsafeRawBufferPointer(rebasing: raw[0..<blank])), blank + 1)
            }
        }
        let (meta, fieldsStart) = try outcome.get()
        guard let key = meta.key, let status = meta.status, (100...999).contains(status), let requestTime = meta.requestTime,
            let responseTime = meta.responseTime
        else { throw .unreadableHead("missing field") }
        // The fields as the writer left them (`Name: value\r\n` each, DISK-FORMAT.md): a line in
        // another form, or one without its CRLF, leaves bytes unread.
        let fields = bytes[(bytes.startIndex + fieldsStart)...]
        let headers = HTTPHeaders(wireLines: fields)
        guard headers.wire.count == fields.count else { throw .unreadableHead("malformed header line") }
        return Head(
            key: key, status: status, reason: meta.reason, requestTime: requestTime, responseTime: responseTime,
            bodyTime: meta.bodyTime, vary: meta.vary, headers: headers, bodyLength: bodyLength, bodyChecksum: bodyChecksum,
            version: version, url: meta.url)
    }

    /// The metadata lines of a head section (before its blank line). Text is one scalar a byte
    /// (``ASCII/string(_:)``): the reason and Vary values were written as the bytes they came
    /// in with (obs-text included); the key is ASCII.
    private struct Meta {
        var key: String?
        var url: String?
        var status: Int?
        var reason = ""
        var requestTime: Double?
        var responseTime: Double?
        var bodyTime: Double?
        var vary: [String: String] = [:]

        init(_ text: UnsafeRawBufferPointer) throws(Problem) {
            var lines = Lines(text)
            while let line = lines.next() {
                guard !line.isEmpty else { continue }
                guard let space = line.firstIndex(of: 32) else { throw .unreadableHead("line without value") }
                let name = UnsafeRawBufferPointer(rebasing: line[..<space])
                let value = UnsafeRawBufferPointer(rebasing: line[(space + 1)...])
                if DiskEntryFormat.equals(name, "key") {
                    key = ASCII.string(value)
                } else if DiskEntryFormat.equals(name, "url") {
                    url = ASCII.string(value)
                } else if DiskEntryFormat.equals(name, "status") {
                    readStatus(value)
                } else if DiskEntryFormat.equals(name, "request-time") {
                    requestTime = DiskEntryFormat.seconds(value)
                } else if DiskEntryFormat.equals(name, "response-time") {
                    responseTime = DiskEntryFormat.seconds(value)
                } else if DiskEntryFormat.equals(name, "body-time") {
                    guard let seconds = DiskEntryFormat.seconds(value) else { throw .unreadableHead("malformed body-time") }
                    bodyTime = seconds
                } else if DiskEntryFormat.equals(name, "vary") {
                    guard let colon = value.firstIndex(of: UInt8(ascii: ":")) else { throw .unreadableHead("malformed vary line") }
                    var start = colon + 1
                    var end = value.count
                    while start < end, value[start] == 32 || value[start] == 9 { start += 1 }
                    while end > start, value[end - 1] == 32 || value[end - 1] == 9 { end -= 1 }
                    vary[ASCII.string(UnsafeRawBufferPointer(rebasing: value[..<colon]))] =
                        ASCII.string(UnsafeRawBufferPointer(rebasing: value[start..<end]))
                }
                // Other names: newer optional fields, ignored.
            }
        }

        /// `200 OK`: the code, then everything after the space that ends it (spaces before the
        /// code are skipped; a reason may be empty).
        private mutating func readStatus(_ value: UnsafeRawBufferPointer) {
            var start = 0
            while start < value.count, value[start] == 32 { start += 1 }
            guard start < value.count else {
                status = nil
                return
            }
            var end = start
            while end < value.count, value[end] != 32 { end += 1 }
            status = DiskEntryFormat.integer(UnsafeRawBufferPointer(rebasing: value[start..<end]), as: Int.self)
            guard end + 1 < value.count else { return }
            let text = UnsafeRawBufferPointer(rebasing: value[(end + 1)...])
            // A reason no parser keeps (a control byte, a bare CR: an older version stored
            // them, review 117) makes the head unreadable, as a field with one does.
            guard ASCII.allFieldValueChars(text.assumingMemoryBound(to: UInt8.self)) else {
                status = nil
                return
            }
            reason = ASCII.string(text)
        }
    }

    /// Lines split at LF, except an LF right after a CR, which stays inside its line (the
    /// format's lines end in a bare LF; the first decoders, over Strings, read CR LF as one
    /// character, and this keeps their reading of such bytes).
    private struct Lines {
        let text: UnsafeRawBufferPointer
        var start = 0

        init(_ text: UnsafeRawBufferPointer) { self.text = text }

        /// The next line, without its LF: empty between two LFs and after an LF that ends the
        /// text; nil past the end.
        mutating func next() -> Slice<UnsafeRawBufferPointer>? {
            guard start <= text.count else { return nil }
            var end = start
            while end < text.count, text[end] != 10 || (end > 0 && text[end - 1] == 13) { end += 1 }
            defer { start = end + 1 }
            return text[start..<end]
        }
    }

    /// Whether `line` starts with the bytes of `prefix`.
    private static func starts(_ line: Slice<UnsafeRawBufferPointer>, with prefix: StaticString) -> Bool {
        guard line.count >= prefix.utf8CodeUnitCount else { return false }
        return equals(UnsafeRawBufferPointer(rebasing: line[line.startIndex..<(line.startIndex + prefix.utf8CodeUnitCount)]), prefix)
    }

    /// Whether `bytes` are exactly `literal`.
    fileprivate static func equals(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && literal.withUTF8Buffer { memcmp(bytes.baseAddress!, $0.baseAddress!, bytes.count) == 0 }
    }

    /// The integer spelled by `line` after its first `offset` bytes.
    private static func integer<T: FixedWidthInteger>(after offset: Int, in line: Slice<UnsafeRawBufferPointer>, as type: T.Type)
        -> T?
    {
        integer(UnsafeRawBufferPointer(rebasing: line[(line.startIndex + offset)...]), as: type)
    }

    /// The decimal integer `bytes` spell, read as `T(String)` reads it: digits at once (nil
    /// when they overflow `T`), anything else (a sign, a stray byte) by that initializer.
    fileprivate static func integer<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, as type: T.Type) -> T? {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return T(ASCII.string(bytes))
        }
        var value: T = 0
        for byte in bytes {
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(T(byte - UInt8(ascii: "0")))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }

    /// A time as the writer spells it (``appendSeconds(_:to:)``: `1764139200.123456`), read as
    /// `Double(String)` reads it. Digits, a point and digits, 16 of them at most and together
    /// at most 2^53, over a power of ten up to 10^16: both exact as doubles, so one division
    /// rounds it as the decimal itself would be (Clinger's fast path); anything else goes to
    /// that initializer, and is no time unless finite: the writer never spells `nan` or `inf`,
    /// and a damaged head's would make an entry fresh forever or never equal to itself.
    fileprivate static func seconds(_ bytes: UnsafeRawBufferPointer) -> Double? {
        var digits: Int64 = 0
        var count = 0
        var fraction = -1
        for byte in bytes {
            if byte == UInt8(ascii: "."), fraction < 0, count > 0 {
                fraction = 0
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), count < 16 else { return finite(bytes) }
            digits = digits * 10 + Int64(byte - UInt8(ascii: "0"))
            count += 1
            if fraction >= 0 { fraction += 1 }
        }
        guard count > 0, fraction != 0, digits <= 1 << 53 else { return finite(bytes) }
        return Double(digits) / powersOfTen[max(fraction, 0)]
    }

    private static func finite(_ bytes: UnsafeRawBufferPointer) -> Double? {
        Double(ASCII.string(bytes)).flatMap { $0.isFinite ? $0 : nil }
    }

    private static let powersOfTen: [Double] = (0...16).map { power in (0..<power).reduce(1.0) { value, _ in value * 10 } }

    /// The hexadecimal number spelled by `line` after its first `offset` bytes, read as
    /// `UInt64(String, radix: 16)` reads it (digits at once, anything else by it).
    private static func hex(after offset: Int, in line: Slice<UnsafeRawBufferPointer>) -> UInt64? {
        let bytes = UnsafeRawBufferPointer(rebasing: line[(line.startIndex + offset)...])
        if bytes.count > 0, bytes.count <= 16 {
            var value: UInt64 = 0
            var plain = true
            for byte in bytes {
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: digit = 16
                }
                guard digit < 16 else {
                    plain = false
                    break
                }
                value = value << 4 | UInt64(digit)
            }
            if plain { return value }
        }
        return UInt64(ASCII.string(bytes), radix: 16)
    }

    /// The blank line that ends a head's metadata: the index of the second of two LFs.
    private static func findBlankLine(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == 10 && bytes[index + 1] == 10 { return index + 1 }
            index += 1
        }
        return nil
    }
}

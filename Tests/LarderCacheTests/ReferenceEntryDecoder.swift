import LarderHTTP

@testable import LarderCache

/// The disk entry decoders as they were first written, over Strings (grapheme by grapheme):
/// the reference the byte-wise decoders are checked against (DiskEntryDecodingTests).
enum ReferenceEntryDecoder {
    typealias Problem = DiskEntryFormat.Problem
    typealias Preamble = DiskEntryFormat.Preamble
    typealias Head = DiskEntryFormat.Head
    static let preambleLength = DiskEntryFormat.preambleLength
    static let magic = DiskEntryFormat.magic
    static let freedMagic = DiskEntryFormat.freedMagic

    static func decodePreamble(_ bytes: ArraySlice<UInt8>, acceptingFreed: Bool = false) throws(Problem) -> Preamble {
        guard bytes.count >= preambleLength else { throw .unknownFormat }
        let start = bytes.startIndex
        let text = String(decoding: bytes[start..<start + preambleLength], as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 5 else { throw .unknownFormat }
        let freed = acceptingFreed && lines[0].hasPrefix(freedMagic)
        guard freed || lines[0].hasPrefix(magic) else { throw .unknownFormat }
        guard let version = Int(lines[0].dropFirst(magic.count)) else { throw .unknownFormat }
        guard DiskEntryFormat.readableVersions.contains(version) else { throw .unknownVersion(version) }
        guard lines[1].hasPrefix("body-length "), let bodyLength = Int64(lines[1].dropFirst(12)),
            lines[2].hasPrefix("body-checksum "), let checksum = UInt64(lines[2].dropFirst(14), radix: 16),
            lines[3].hasPrefix("head-checksum "), let headChecksum = UInt64(lines[3].dropFirst(14), radix: 16),
            lines[4].hasPrefix("head-length "), let headLength = Int(lines[4].dropFirst(12)),
            bodyLength >= 0, bodyLength <= DiskEntryFormat.maxBodyLength, headLength >= 0, headLength < 1 << 20
        else { throw .unreadableHead("malformed preamble") }
        return Preamble(
            bodyLength: bodyLength, bodyChecksum: checksum, headChecksum: headChecksum, headLength: headLength, freed: freed,
            version: version)
    }

    /// Parses the head section.
    static func decodeHead(
        _ bytes: ArraySlice<UInt8>, bodyLength: Int64, bodyChecksum: UInt64
    ) throws(Problem) -> Head {
        let bytes = Array(bytes)
        guard let blank = findBlankLine(bytes) else { throw .unreadableHead("no end of metadata") }
        // One scalar a byte: the reason and Vary values were written as the bytes they came in
        // with (obs-text included); the key is ASCII.
        let meta = bytes.withUnsafeBytes { ASCII.string(UnsafeRawBufferPointer(rebasing: $0[0..<blank])) }
        var key: String?
        var status: Int?
        var reason = ""
        var requestTime: Double?
        var responseTime: Double?
        var bodyTime: Double?
        var vary: [String: String] = [:]
        for line in meta.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { throw .unreadableHead("line without value") }
            let name = line[..<space]
            let value = line[line.index(after: space)...]
            switch name {
            case "key": key = String(value)
            case "status":
                let parts = value.split(separator: " ", maxSplits: 1)
                status = parts.first.flatMap { Int($0) }
                reason = parts.count > 1 ? String(parts[1]) : ""
                // Since review 117: a reason with a control byte makes the head unreadable.
                if !reason.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }) { status = nil }
            case "request-time": requestTime = seconds(value)
            case "response-time": responseTime = seconds(value)
            case "body-time":
                guard let time = seconds(value) else { throw .unreadableHead("malformed body-time") }
                bodyTime = time
            case "vary":
                guard let colon = value.firstIndex(of: ":") else { throw .unreadableHead("malformed vary line") }
                vary[String(value[..<colon])] = String(ASCII.trimOWS(value[value.index(after: colon)...]))
            default: break  // newer optional fields are ignored
            }
        }
        guard let key, let status, (100...999).contains(status), let requestTime, let responseTime else {
            throw .unreadableHead("missing field")
        }
        // The fields as the writer left them (`Name: value\r\n` each, DISK-FORMAT.md): a line in
        // another form, or one without its CRLF, leaves bytes unread.
        let fields = bytes[(blank + 1)...]
        let headers = HTTPHeaders(wireLines: fields)
        guard headers.wire.count == fields.count else { throw .unreadableHead("malformed header line") }
        return Head(
            key: key, status: status, reason: reason, requestTime: requestTime, responseTime: responseTime,
            bodyTime: bodyTime, vary: vary, headers: headers, bodyLength: bodyLength, bodyChecksum: bodyChecksum)
    }

    /// A time, finite (a damaged head's `nan` or `inf` is none).
    private static func seconds(_ text: Substring) -> Double? {
        Double(text).flatMap { $0.isFinite ? $0 : nil }
    }

    private static func findBlankLine(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == 10 && bytes[index + 1] == 10 { return index + 1 }
            index += 1
        }
        return nil
    }
}

import LarderCache
import LarderConfig
import LarderHTTP

/// The fuzz targets. Each takes arbitrary bytes, must never crash, hang or trip the address
/// sanitizer, and checks a property that holds for every input (a differential check where
/// one exists: the same bytes fed whole and in two pieces must give the same answer).
enum FuzzTarget: String, CaseIterable {
    case requestParser = "request-parser"
    case responseParser = "response-parser"
    case chunked
    case cacheControl = "cache-control"
    case config
    case diskEntry = "disk-entry"

    func run(_ input: UnsafeRawBufferPointer) {
        switch self {
        case .requestParser: FuzzTarget.requestParser(input)
        case .responseParser: FuzzTarget.responseParser(input)
        case .chunked: FuzzTarget.chunked(input)
        case .cacheControl: FuzzTarget.cacheControl(input)
        case .config: FuzzTarget.config(input)
        case .diskEntry: FuzzTarget.diskEntry(input)
        }
    }

    /// The request-head parser, then body framing on whatever it accepted.
    static func requestParser(_ input: UnsafeRawBufferPointer) {
        let whole = parseHead(input, split: nil)
        if input.count > 1 {
            // The split point comes from the input itself so the fuzzer explores it too.
            let split = 1 + Int(input[0]) % (input.count - 1)
            let pieces = parseHead(input, split: split)
            precondition(whole == pieces, "request head parsed differently when split at \(split): \(whole) vs \(pieces)")
        }
    }

    private static func parseHead(_ input: UnsafeRawBufferPointer, split: Int?) -> String {
        var parser = RequestHeadParser(maxHeadBytes: 4096)
        do {
            if let split {
                // A first call with a prefix (as when bytes trickle in), then the whole buffer.
                if case .complete(let head, let length) = try parser.parse(UnsafeRawBufferPointer(rebasing: input[0..<split])) {
                    return describe(head, length)
                }
            }
            switch try parser.parse(input) {
            case .incomplete:
                return "incomplete"
            case .complete(let head, let length):
                precondition(length <= input.count)
                checkKnownFieldTags(head.headers, pick: input.count)
                return describe(head, length)
            }
        } catch {
            return "error \(error.status)"
        }
    }

    private static func describe(_ head: RequestHead, _ length: Int) -> String {
        let framing: String
        do {
            framing = "\(try BodyFraming.ofRequest(head))"
        } catch {
            framing = "framing error \(error.status)"
        }
        return "\(head.method.rawValue) \(head.targetText) \(head.headers.fields.count) fields, \(length) bytes, \(framing)"
    }

    /// The response-head parser fed one line at a time, as libcurl hands an origin's head over
    /// (the input split after each LF; its first byte's low bit says whether it answers a HEAD):
    /// every head it ends, interim or final, has known-field tags that agree with its names.
    static func responseParser(_ input: UnsafeRawBufferPointer) {
        var parser = ResponseHeadParser(answersHEAD: input.first.map { $0 & 1 == 1 } ?? false)
        var start = 0
        for index in 0..<input.count where input[index] == 10 || index == input.count - 1 {
            let line = UnsafeRawBufferPointer(rebasing: input[start...index])
            start = index + 1
            let event: ResponseHeadParser.Event
            do {
                event = try parser.feed(line)
            } catch {
                return
            }
            switch event {
            case .none: break
            case .interim(let head), .final(let head): checkKnownFieldTags(head.headers, pick: input.count)
            }
        }
    }

    /// The chunked decoder, whole and split.
    static func chunked(_ input: UnsafeRawBufferPointer) {
        let whole = decodeChunked([input])
        if input.count > 1 {
            let split = 1 + Int(input[0]) % (input.count - 1)
            let pieces = decodeChunked([
                UnsafeRawBufferPointer(rebasing: input[0..<split]), UnsafeRawBufferPointer(rebasing: input[split...]),
            ])
            precondition(whole == pieces, "chunked body decoded differently when split at \(split)")
        }
    }

    private struct Decoded: Equatable {
        var body: [UInt8] = []
        var consumed = 0
        var complete = false
        var error: Int?
    }

    private static func decodeChunked(_ pieces: [UnsafeRawBufferPointer]) -> Decoded {
        var decoder = ChunkedDecoder()
        var result = Decoded()
        for piece in pieces {
            do {
                let used = try decoder.decode(piece) { result.body.append(contentsOf: $0) }
                precondition(used <= piece.count)
                result.consumed += used
                if decoder.isComplete { break }
            } catch {
                result.error = error.status
                break
            }
        }
        result.complete = decoder.isComplete
        // Where the message ended does not depend on how it arrived; after an error only the
        // error matters (a call that throws has already handed part of its piece to the sink).
        if result.error != nil {
            result.consumed = 0
            result.body = []
        }
        precondition(result.body.count <= result.consumed, "more body than input")
        return result
    }

    /// The Cache-Control parser: every directive has a lower-case token name, and the parse is
    /// stable (re-parsing its own rendering gives the same directives).
    static func cacheControl(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        let parsed = CacheControl(parsing: text)
        for directive in parsed.others {
            precondition(!directive.name.isEmpty && directive.name == directive.name.lowercased() && parsed.has(directive.name))
        }
        _ = (parsed.minFresh, parsed.onlyIfCached, parsed.deltaSeconds("x"))
        var members: [String] = []
        let seconds: [(String, Int?)] = [
            ("max-age", parsed.maxAge), ("s-maxage", parsed.sMaxAge), ("min-fresh", parsed.minFresh),
            ("stale-while-revalidate", parsed.staleWhileRevalidate), ("stale-if-error", parsed.staleIfError),
        ]
        for (name, value) in seconds { if let value { members.append("\(name)=\(value)") } }
        if let maxStale = parsed.maxStale { members.append(maxStale == Int.max ? "max-stale" : "max-stale=\(maxStale)") }
        let flags: [(String, Bool)] = [
            ("no-cache", parsed.noCache), ("no-store", parsed.noStore), ("public", parsed.isPublic), ("private", parsed.isPrivate),
            ("must-revalidate", parsed.mustRevalidate), ("proxy-revalidate", parsed.proxyRevalidate),
            ("must-understand", parsed.mustUnderstand), ("only-if-cached", parsed.onlyIfCached), ("immutable", parsed.immutable),
        ]
        for (name, set) in flags where set { members.append(name) }
        for directive in parsed.others {
            guard let value = directive.value else {
                members.append(directive.name)
                continue
            }
            // Escape per Unicode scalar: a quote followed by a combining mark is one Character,
            // which String.replacing would not see.
            var escaped = String.UnicodeScalarView()
            for scalar in value.unicodeScalars {
                if scalar == "\\" || scalar == "\"" { escaped.append("\\") }
                escaped.append(scalar)
            }
            members.append("\(directive.name)=\"\(String(escaped))\"")
        }
        let rendered = members.joined(separator: ", ")
        precondition(CacheControl(parsing: rendered) == parsed, "Cache-Control re-parse differs: \(text.debugDescription) -> \(rendered)")
    }

    /// The configuration language: a file is either a Config or errors, every error points
    /// inside the file.
    static func config(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        // Counted in bytes: "\r\n" is one Character, so splitting the String would miss it. A
        // bare CR is reported on the line it starts, so every line break counts.
        let lines = 1 + input.reduce(0) { $0 + ($1 == 10 || $1 == 13 ? 1 : 0) }
        switch ConfigLoader.parse(text, file: "fuzz.toml") {
        case .success:
            break
        case .failure(let errors):
            precondition(!errors.errors.isEmpty)
            for error in errors.errors {
                precondition(error.position.line >= 1 && error.position.line <= lines, "error line outside the file: \(error)")
                precondition(error.position.column >= 1, "error column < 1: \(error)")
                _ = error.description
            }
        }
    }

    /// Every format's checksum of the bytes fed whole and in pieces of lengths the input picks,
    /// each piece an exact-size heap copy at its own alignment (so the address sanitizer sees any
    /// read past a piece, a lane block's last word included): the same value.
    static func checksumInPieces(_ input: UnsafeRawBufferPointer) {
        for version in DiskEntryFormat.readableVersions {
            var whole = BodyChecksum(entryVersion: version)
            whole.update(input)
            var pieces = BodyChecksum(entryVersion: version)
            var offset = 0
            var pick = 0
            while offset < input.count {
                let length = min(input.count - offset, 1 + Int(input[pick % input.count]) % 131)
                let shift = Int(input[(pick + 1) % input.count]) % 8
                let raw = UnsafeMutableRawPointer.allocate(byteCount: length + shift, alignment: 16)
                (raw + shift).copyMemory(from: input.baseAddress! + offset, byteCount: length)
                // Only the copy: bytes before it are left uninitialised on purpose (never read).
                let piece = UnsafeMutableRawBufferPointer(start: raw + shift, count: length)
                pieces.update(UnsafeRawBufferPointer(piece))
                raw.deallocate()
                offset += length
                pick += 2
            }
            precondition(whole.value == pieces.value, "format \(version): \(input.count) bytes in pieces give another checksum")
        }
    }

    /// A disk record's preamble and head (what a damaged or tampered cache file holds): the
    /// preamble's lengths are in range when it reads, and a head that reads, of the kind Larder
    /// writes (an ASCII key, URL and Vary names, no CR or LF in its texts), is written and read back
    /// to the same head (times to the microsecond the writer keeps). The same bytes as a block
    /// table: an entry is read only where the table holds all eight of its bytes.
    static func diskEntry(_ input: UnsafeRawBufferPointer) {
        checksumInPieces(input)
        let bytes = Array(input)
        for block in [-1, 0, 1, bytes.count / 8 - 1, bytes.count / 8] {
            let entry = DiskEntryFormat.blockChecksum(inTable: bytes[...], at: block)
            precondition((entry != nil) == (block >= 0 && (block + 1) * 8 <= bytes.count))
        }
        if let preamble = try? DiskEntryFormat.decodePreamble(bytes[...], acceptingFreed: bytes.first.map { $0 & 1 == 1 } ?? false) {
            precondition(preamble.bodyLength >= 0 && preamble.headLength >= 0 && preamble.headLength < 1 << 20)
        }
        guard let head = try? DiskEntryFormat.decodeHead(bytes[...], bodyLength: 0, bodyChecksum: 0) else { return }
        checkKnownFieldTags(head.headers, pick: bytes.count)
        precondition((100...999).contains(head.status))
        func writable(_ text: String, ascii: Bool) -> Bool {
            text.unicodeScalars.allSatisfy { $0 != "\r" && $0 != "\n" && (!ascii || $0.isASCII) }
        }
        guard writable(head.key, ascii: true), head.url.map({ writable($0, ascii: true) }) ?? true, writable(head.reason, ascii: false),
            head.vary.allSatisfy({ writable($0.key, ascii: true) && writable($0.value, ascii: false) })
        else { return }
        let written = DiskEntryFormat.entryHead(head, bodyLength: 0, bodyChecksum: 0)
        let again: DiskEntryFormat.Head
        do {
            again = try DiskEntryFormat.decodeHead(written[DiskEntryFormat.preambleLength...], bodyLength: 0, bodyChecksum: 0)
        } catch {
            preconditionFailure("a head read from \(bytes) was written as \(written) and does not read back: \(error)")
        }
        func close(_ first: Double, _ second: Double) -> Bool {
            first == second || (first.isNaN && second.isNaN) || abs(first - second) <= 1e-6 * max(1, abs(first))
        }
        precondition(
            again.key == head.key && again.url == head.url && again.status == head.status && again.reason == head.reason
                && again.vary == head.vary
                && again.headers == head.headers && close(again.requestTime, head.requestTime)
                && close(again.responseTime, head.responseTime),
            "a head read from \(bytes) reads back differently: \(head) then \(again)")
    }
}

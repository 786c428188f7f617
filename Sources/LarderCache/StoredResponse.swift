import LarderHTTP
import LarderIO
import Synchronization

/// A response held by a cache tier. Immutable and shared by reference: a hit hands the same
/// object to every client, and an update (a 304 freshening the headers) replaces it.
public final class StoredResponse: Sendable {
    /// Where the body bytes live.
    public enum Body: Sendable {
        /// In memory.
        case memory([UInt8])
        /// In a disk-cache file (kept open, so eviction cannot pull it from under a reader): the
        /// body starts at `offset` and has `length` bytes; `format`, the entry's format version,
        /// says which checksums its block table holds.
        case file(OpenFile, offset: Int64, length: Int64, format: Int)
        /// In memory, in an anonymous memory file of exactly `length` bytes: the memory tier's
        /// form for large bodies once hit there, which later hits send with sendfile(2) instead
        /// of copying them into the socket (see ``inMemory(_:budget:)``).
        case memoryFile(OpenFile, length: Int)

        /// `bytes` in the form the memory tier keeps for a body that has been hit there (until
        /// then, from a miss or a disk read, it keeps the array, ``TieredCache``): an anonymous
        /// memory file for sizes in `budget`'s ``MemoryFileBudget/fileSizes`` while it has places
        /// left, the array otherwise.
        public static func inMemory(_ bytes: [UInt8], budget: MemoryFileBudget) -> Body {
            if budget.fileSizes.contains(bytes.count), let file = OpenFile.anonymous(copying: bytes, budget: budget) {
                return .memoryFile(file, length: bytes.count)
            }
            return .memory(bytes)
        }
    }

    public let key: CacheKey
    /// The URL it was fetched from, kept when its route's key is not the URL (`debian:{path}`,
    /// `sha256:{digest}`) for listings; nil when the key is the URL.
    public let url: String?
    public let status: Int
    public let reason: String
    /// Lookups that found this response in the memory tier (for the listing; the first one
    /// moves a large body into a memory file, ``TieredCache``). A 304 that replaces it starts
    /// a new count.
    public let hits = Atomic<Int>(0)
    /// End-to-end headers as received (hop-by-hop fields and framing removed), read back from
    /// ``headBytes`` on each call: an entry keeps its fields once, in wire form. Hits send those
    /// bytes and read the validators kept apart (``etag``, ``lastModified``).
    public var headers: HTTPHeaders { HTTPHeaders(wireLines: wireFields) }
    public let body: Body
    /// When the request that produced this response was sent (wall seconds, RFC 9111 §4.2.3).
    public let requestTime: Double
    /// When the response was received (wall seconds).
    public let responseTime: Double
    /// When its body was received: the `responseTime` of the fill that stored it, which a
    /// refresh (a 304, a matching HEAD) keeps as it moves `responseTime` on. What tells the
    /// stored body apart from another fill's, whatever their validators say: a refresh lands
    /// only over the body it validated (``holdsBody(of:)``).
    public let bodyTime: Double
    /// The request header values this variant was selected by (`Vary`), lower-cased names.
    public let varyValues: [String: String]
    /// Freshness lifetime in seconds (§4.2.1), computed when stored.
    public let freshnessLifetime: Double
    /// `corrected_initial_age` of §4.2.3, computed when stored.
    public let correctedInitialAge: Double
    /// The wire form of the status line and stored headers plus `Via`, ready to send; per-hit
    /// fields (Age, Cache-Status, framing) follow it.
    public let headBytes: [UInt8]
    /// Where the stored header fields are in `headBytes` (after the status line, before `Via`):
    /// a disk entry keeps them in the same wire form, so they are serialized once.
    public let fieldsRange: Range<Int>
    /// The response's Cache-Control directives that matter after storing, parsed once.
    public let directives: ResponseDirectives
    /// The entity tag, if any (validator for If-None-Match, RFC 9110 §8.8.3).
    public let etag: String?
    /// Last-Modified as seconds, if valid (validator for If-Modified-Since).
    public let lastModified: Int?
    /// The disk index entry this was read from (``DiskIndex/Entry/serial``), kept by copies of
    /// it; 0 when it was not read from disk. A promotion to memory lands only while the index
    /// still holds that entry: a removal, or a newer version stored since, wins.
    public let diskSerial: UInt64

    /// `cacheControl`, when given, is `headers`' Cache-Control already parsed (a fill parses it
    /// once for every decision it makes); `preparedHead`, when given, is
    /// ``serializeHead(status:reason:headers:)`` of these same status, reason and headers (a
    /// fill builds it when the head arrives and sends it to its clients too).
    public init(
        key: CacheKey, url: String? = nil, status: Int, reason: String, headers: HTTPHeaders, body: Body,
        requestTime: Double, responseTime: Double, bodyTime: Double? = nil, varyValues: [String: String] = [:],
        freshnessLifetime: Double, correctedInitialAge: Double, cacheControl: CacheControl? = nil,
        preparedHead: PreparedHead? = nil, diskSerial: UInt64 = 0
    ) {
        self.key = key
        self.diskSerial = diskSerial
        self.url = url
        self.status = status
        self.reason = reason
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.bodyTime = bodyTime ?? responseTime
        self.varyValues = varyValues
        self.freshnessLifetime = freshnessLifetime
        self.correctedInitialAge = correctedInitialAge
        assert(
            preparedHead.map { $0.bytes == StoredResponse.serializeHead(status: status, reason: reason, headers: headers).bytes } ?? true,
            "preparedHead must serialize these status, reason and headers")
        let prepared = preparedHead ?? StoredResponse.serializeHead(status: status, reason: reason, headers: headers)
        headBytes = prepared.bytes
        fieldsRange = prepared.fields
        directives = ResponseDirectives(cacheControl ?? CacheControl(headers))
        etag = headers[.etag]
        lastModified = headers.date(.lastModified)
    }

    /// A stored response whose lifetime and initial age are computed from its headers
    /// (RFC 9111 §4.2.1, §4.2.3), their Cache-Control parsed once for both.
    public static func make(
        key: CacheKey, url: String? = nil, status: Int, reason: String, headers: HTTPHeaders, body: Body,
        requestTime: Double, responseTime: Double, bodyTime: Double? = nil, varyValues: [String: String], diskSerial: UInt64 = 0
    ) -> StoredResponse {
        let cacheControl = CacheControl(headers)
        return StoredResponse(
            key: key, url: url, status: status, reason: reason, headers: headers, body: body,
            requestTime: requestTime, responseTime: responseTime, bodyTime: bodyTime, varyValues: varyValues,
            freshnessLifetime: Freshness.lifetime(
                status: status, headers: headers, cacheControl: cacheControl, responseTime: responseTime),
            correctedInitialAge: Freshness.correctedInitialAge(headers: headers, requestTime: requestTime, responseTime: responseTime),
            cacheControl: cacheControl, diskSerial: diskSerial)
    }

    /// A stored head in wire form: status line, fields, `Via`.
    public struct PreparedHead: Sendable {
        public let bytes: [UInt8]
        /// Where the fields are in `bytes`.
        public let fields: Range<Int>
    }

    /// `Via: 1.1 larder`, the line every response Larder forwards or serves carries (RFC 9110 §7.6.3).
    public static let viaLine: [UInt8] = Array("Via: 1.1 larder\r\n".utf8)

    /// The wire form of a stored head: `HTTP/1.1 status reason`, the fields, `Via`.
    public static func serializeHead(status: Int, reason: String, headers: HTTPHeaders) -> PreparedHead {
        let wire = headers.wire
        guard (100..<1000).contains(status) else { return serializeHead(anyStatus: status, reason: reason, headers: headers) }
        // Room for what it will hold ("HTTP/1.1 200 " is 13 bytes; a reason of Latin-1 text
        // takes a byte a scalar, no more than its UTF-8), written in place in one piece rather
        // than appended piece by piece.
        var fields = 0..<0
        let bytes = ByteArrays.make(capacity: 13 + reason.utf8.count + 2 + wire.count + viaLine.count) { buffer in
            var writer = ByteWriter(buffer)
            writer.append("HTTP/1.1 " as StaticString)
            writer.append(status, zeroPaddedTo: 3)
            writer.append(32)
            ASCII.appendBytes(of: reason, to: &writer)
            writer.append(13)
            writer.append(10)
            let start = writer.count
            wire.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
            fields = start..<writer.count
            viaLine.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
            return writer.count
        }
        return PreparedHead(bytes: bytes, fields: fields)
    }

    /// ``serializeHead(status:reason:headers:)`` for a status of other than three digits, as
    /// ``HeadSerializer`` spells it.
    private static func serializeHead(anyStatus status: Int, reason: String, headers: HTTPHeaders) -> PreparedHead {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(13 + reason.utf8.count + 2 + headers.wire.count + viaLine.count)
        HeadSerializer.appendStatusLine(status, reason, to: &bytes)
        let start = bytes.count
        HeadSerializer.appendFields(headers, to: &bytes)
        let end = bytes.count
        bytes.append(contentsOf: viaLine)
        return PreparedHead(bytes: bytes, fields: start..<end)
    }

    /// The stored header fields in wire form (a slice of `headBytes`).
    public var wireFields: ArraySlice<UInt8> { headBytes[fieldsRange] }

    /// Whether it can be revalidated with a conditional request.
    public var hasValidator: Bool { etag != nil || lastModified != nil }

    /// The response updated by a 304 (or a HEAD response) to a validation request
    /// (RFC 9111 §3.2, §4.3.4): each field of `update` replaces the stored ones of that name,
    /// except framing and hop-by-hop fields; times are those of the validation exchange. Nor
    /// `Set-Cookie`: the validation was one client's, and the stored response answers every
    /// client (Larder stores no response with one, ``Storability``). Nor `Content-Type` and
    /// `Content-Encoding`, which describe the stored bytes, not the validation (§3.2 lets a
    /// cache keep such fields for the integrity of what it stored): a 304 that relabelled a
    /// plain body as gzip, sent for one client's request, broke it for every client after.
    /// Nor the `ETag` of a response that has one: the update was selected by it, compared
    /// weakly (§4.3.4), and the stored tag names the stored bytes (nginx answers for the gzip
    /// it tagged `W/"x"` with `"x"`, its plain body's tag, which `If-Range` would then match).
    /// `forOneClient`: the result answers the validation's own client only and is never
    /// stored, so the 304's `Set-Cookie` is that client's to have.
    public func freshened(by update: HTTPHeaders, requestTime: Double, responseTime: Double, forOneClient: Bool = false) -> StoredResponse {
        var merged = headers
        var excluded = ["content-length", "transfer-encoding", "content-range", "age", "content-type", "content-encoding"]
        if !forOneClient { excluded.append("set-cookie") }
        if etag != nil { excluded.append("etag") }
        var replaced = Set<String>()
        for field in update.fields {
            let name = field.name.lowercased()
            if excluded.contains(name) { continue }
            if replaced.insert(name).inserted { merged.remove(field.name) }
            merged.add(field.name, field.value)
        }
        // The 304's Age (if any) counts for the new initial age; the stored one does not.
        var timing = merged
        if let age = update["Age"] { timing.set("Age", age) }
        let cacheControl = CacheControl(merged)
        return StoredResponse(
            key: key, url: url, status: status, reason: reason, headers: merged, body: body,
            requestTime: requestTime, responseTime: responseTime, bodyTime: bodyTime, varyValues: varyValues,
            freshnessLifetime: Freshness.lifetime(status: status, headers: merged, cacheControl: cacheControl, responseTime: responseTime),
            correctedInitialAge: Freshness.correctedInitialAge(headers: timing, requestTime: requestTime, responseTime: responseTime),
            cacheControl: cacheControl, diskSerial: diskSerial)
    }

    /// The response with only the freshness and validator fields of `update` taken (RFC 9110
    /// §15.4.5 lists what a 304 carries: `Cache-Control`, `Expires`, `Date`, `ETag`, and the
    /// validators), for a 304 whose other fields are one client's: the validation holds for
    /// every client, its cookie and whatever else came with it for none.
    public func retimed(by update: HTTPHeaders, requestTime: Double, responseTime: Double) -> StoredResponse {
        let kept: Set<String> = ["cache-control", "expires", "date", "etag", "last-modified", "age"]
        var timing = HTTPHeaders()
        for field in update.fields where kept.contains(field.name.lowercased()) { timing.add(field.name, field.value) }
        return freshened(by: timing, requestTime: requestTime, responseTime: responseTime)
    }

    /// Whether this response arrived after one that arrived at `responseTime`
    /// (``arrival(_:isAfter:now:)`` on the wall clock).
    public func arrived(after responseTime: Double) -> Bool {
        StoredResponse.arrival(self.responseTime, isAfter: responseTime, now: Clocks.wallSeconds)
    }

    /// Whether a response that arrived at `time` arrived after one at `other`, and not later
    /// than `now` (asked only then): one stamped after now was stored before the wall clock
    /// stepped back, and gives way rather than keep newer ones out until the clock catches up.
    /// The rule both tiers keep the later of two fills of a variant by.
    static func arrival(_ time: Double, isAfter other: Double, now: () -> Double) -> Bool {
        time > other && time <= now()
    }

    /// Whether a response that arrived at `time` is more recent than one at `other`, of several
    /// that match a request (RFC 9111 §4.1): the later, unless stamped after `now` (asked only
    /// when the two differ): one stored before the wall clock stepped back is the least recent.
    static func isMoreRecent(_ time: Double, than other: Double, now: () -> Double) -> Bool {
        guard time != other else { return false }
        let clock = now()
        if (time <= clock) != (other <= clock) { return time <= clock }
        return time > other
    }

    /// ``arrived(after:)-(Double)`` for `other`'s arrival.
    public func arrived(after other: StoredResponse) -> Bool { arrived(after: other.responseTime) }

    /// Whether this response holds `original`'s body: it is `original`, a copy of it, or a
    /// refresh of either (its ``bodyTime``, to the microsecond a disk entry keeps). Another
    /// fill's body is not, even under the same validators: an origin may reuse a weak ETag, a
    /// Last-Modified, or a strong ETag wrongly, and a 304 validates the response it was asked
    /// about (RFC 9111 §4.3.4).
    public func holdsBody(of original: StoredResponse) -> Bool {
        StoredResponse.sameArrival(bodyTime, original.bodyTime)
    }

    /// Whether two arrival times are one, to the microsecond a disk entry keeps.
    static func sameArrival(_ first: Double, _ second: Double) -> Bool {
        (first * 1_000_000).rounded() == (second * 1_000_000).rounded()
    }

    /// Seconds past its freshness lifetime at `now` (negative while fresh).
    public func staleness(now: Double) -> Double {
        currentAge(now: now) - freshnessLifetime
    }

    /// The same response with another body (a disk entry promoted into memory): every part
    /// taken as it is, nothing read back from the head again; the hit count starts anew.
    public func withBody(_ newBody: Body) -> StoredResponse {
        StoredResponse(copying: self, body: newBody)
    }

    private init(copying other: StoredResponse, body: Body) {
        key = other.key
        url = other.url
        status = other.status
        reason = other.reason
        self.body = body
        requestTime = other.requestTime
        responseTime = other.responseTime
        bodyTime = other.bodyTime
        varyValues = other.varyValues
        freshnessLifetime = other.freshnessLifetime
        correctedInitialAge = other.correctedInitialAge
        headBytes = other.headBytes
        fieldsRange = other.fieldsRange
        directives = other.directives
        etag = other.etag
        lastModified = other.lastModified
        diskSerial = other.diskSerial
    }

    /// Whether the body lives in a disk file.
    public var isOnDisk: Bool {
        if case .file = body { return true }
        return false
    }

    /// Whether the body is held in memory (an array or an anonymous memory file), the form
    /// the memory tier keeps.
    public var isInMemory: Bool {
        if case .file = body { return false }
        return true
    }

    /// Body length in bytes.
    public var bodyLength: Int {
        switch body {
        case .memory(let bytes): bytes.count
        case .file(_, _, let length, _): Int(length)
        case .memoryFile(_, let length): length
        }
    }

    /// The body bytes, when the body is in memory; read back from an anonymous memory file
    /// (used off the hit path: disk stores, tests).
    public var memoryBody: [UInt8]? {
        switch body {
        case .memory(let bytes): bytes
        case .memoryFile(let file, let length): file.mapped.map { Array($0) } ?? (try? FileSystem.read(file.fd, at: 0, count: length))
        case .file: nil
        }
    }

    /// Bytes this entry holds in a memory tier, what `memory.max_bytes` counts: the body (a
    /// memory file's pages, plus its inode and descriptor), the serialized head, the parsed
    /// fields (their bytes and offsets), key and validators, each array as the allocator rounds
    /// it, and ``memoryOverhead``.
    public var memoryCost: Int {
        bodyMemoryCost + StoredResponse.allocated(headBytes.count) + key.url.utf8.count + (url?.utf8.count ?? 0) + (etag?.utf8.count ?? 0)
            + StoredResponse.memoryOverhead
    }

    /// The body's part of ``memoryCost``: its bytes as the allocator (an array) or the page size
    /// (a memory file) rounds them.
    var bodyMemoryCost: Int {
        switch body {
        case .memory(let bytes): StoredResponse.allocated(bytes.count)
        case .memoryFile(_, let length): (length + 4095) / 4096 * 4096 + 1024
        case .file: 0
        }
    }

    /// What an entry holds besides those: this object, the tier's slot and index entry, small
    /// blocks. Measured against resident memory with 100-byte to 20 KiB responses of nine
    /// fields (docs/CACHING.md, "The memory tier's budget").
    public static let memoryOverhead = 900

    /// The block an array of `count` bytes takes: its 32-byte header, rounded up to the
    /// allocator's size class (mimalloc: four classes per power of two above 1 KiB).
    static func allocated(_ count: Int) -> Int {
        let size = count + 32
        guard size > 1024 else { return (size + 63) / 64 * 64 }
        let step = (1 << (Int.bitWidth - 1 - size.leadingZeroBitCount)) / 4
        return (size + step - 1) / step * step
    }

    /// `current_age` (§4.2.3) at wall time `now`.
    @inline(__always)
    public func currentAge(now: Double) -> Double {
        correctedInitialAge + max(0, now - responseTime)
    }

    /// Whether the response is fresh at `now` (§4.2).
    @inline(__always)
    public func isFresh(now: Double) -> Bool {
        freshnessLifetime > currentAge(now: now)
    }
}

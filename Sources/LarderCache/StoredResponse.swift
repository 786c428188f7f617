import LarderHTTP
import LarderIO

/// A response held by a cache tier. Immutable and shared by reference: a hit hands the same
/// object to every client, and an update (a 304 freshening the headers) replaces it.
public final class StoredResponse: Sendable {
    /// Where the body bytes live.
    public enum Body: Sendable {
        /// In memory.
        case memory([UInt8])
        /// In a disk-cache file (kept open, so eviction cannot pull it from under a reader): the
        /// body starts at `offset` and has `length` bytes.
        case file(OpenFile, offset: Int64, length: Int64)
    }

    public let key: CacheKey
    public let status: Int
    public let reason: String
    /// End-to-end headers as received (hop-by-hop fields and framing removed).
    public let headers: HTTPHeaders
    public let body: Body
    /// When the request that produced this response was sent (wall seconds, RFC 9111 §4.2.3).
    public let requestTime: Double
    /// When the response was received (wall seconds).
    public let responseTime: Double
    /// The request header values this variant was selected by (`Vary`), lower-cased names.
    public let varyValues: [String: String]
    /// Freshness lifetime in seconds (§4.2.1), computed when stored.
    public let freshnessLifetime: Double
    /// `corrected_initial_age` of §4.2.3, computed when stored.
    public let correctedInitialAge: Double
    /// The wire form of the status line and stored headers plus `Via`, ready to send; per-hit
    /// fields (Age, Cache-Status, framing) follow it.
    public let headBytes: [UInt8]

    public init(
        key: CacheKey, status: Int, reason: String, headers: HTTPHeaders, body: Body,
        requestTime: Double, responseTime: Double, varyValues: [String: String] = [:],
        freshnessLifetime: Double, correctedInitialAge: Double
    ) {
        self.key = key
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.varyValues = varyValues
        self.freshnessLifetime = freshnessLifetime
        self.correctedInitialAge = correctedInitialAge
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        HeadSerializer.appendStatusLine(status, reason, to: &bytes)
        HeadSerializer.appendFields(headers, to: &bytes)
        bytes.append(contentsOf: "Via: 1.1 larder\r\n".utf8)
        headBytes = bytes
    }

    /// The same response with another body (a disk entry promoted into memory).
    public func withBody(_ newBody: Body) -> StoredResponse {
        StoredResponse(
            key: key, status: status, reason: reason, headers: headers, body: newBody, requestTime: requestTime,
            responseTime: responseTime, varyValues: varyValues, freshnessLifetime: freshnessLifetime,
            correctedInitialAge: correctedInitialAge)
    }

    /// Whether the body lives in a disk file.
    public var isOnDisk: Bool {
        if case .file = body { return true }
        return false
    }

    /// Body length in bytes.
    public var bodyLength: Int {
        switch body {
        case .memory(let bytes): bytes.count
        case .file(_, _, let length): Int(length)
        }
    }

    /// The body bytes, when the body is in memory.
    public var memoryBody: [UInt8]? {
        if case .memory(let bytes) = body { return bytes }
        return nil
    }

    /// Bytes this entry costs a memory tier (body, head, bookkeeping).
    public var memoryCost: Int {
        (memoryBody?.count ?? 0) + headBytes.count + 256
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

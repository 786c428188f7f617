import LarderCache
import LarderHTTP

/// Small factories for stored responses.
enum Fixtures {
    static func key(_ path: String) -> CacheKey {
        CacheKey(AbsoluteURL(scheme: "http", host: "example.org", port: 80, pathAndQuery: path))
    }

    static func response(
        _ path: String, bodySize: Int = 100, body: StoredResponse.Body? = nil,
        headers: HTTPHeaders = ["Cache-Control": "max-age=60"],
        lifetime: Double = 60, age: Double = 0, responseTime: Double = 1000, vary: [String: String] = [:]
    ) -> StoredResponse {
        StoredResponse(
            key: key(path), status: 200, reason: "OK", headers: headers,
            body: body ?? .memory([UInt8](repeating: 7, count: bodySize)), requestTime: responseTime, responseTime: responseTime,
            varyValues: vary, freshnessLifetime: lifetime, correctedInitialAge: age)
    }

    static func limits(bytes: Int = 1 << 20, entries: Int = 100, object: Int = 1 << 20) -> MemoryCache.Limits {
        .init(maxBytes: bytes, maxEntries: entries, maxObjectBytes: object)
    }
}

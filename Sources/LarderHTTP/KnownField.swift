/// A field name the proxy asks about on nearly every request or response. ``HTTPHeaders`` tags
/// each field whose name is one of these as it is added, and keeps a bit per name present: asking
/// for one that is absent (most lookups are: `Range`, `Authorization`, `Set-Cookie`, `Age`...)
/// reads one word instead of every field's name, and one that is present is found by its tag.
/// Names compare case-insensitively (RFC 9110 §5.1).
public enum KnownField: UInt8, Sendable, CaseIterable {
    case age = 1
    case via
    case date
    case etag
    case host
    case vary
    case range
    case pragma
    case expires
    case ifMatch
    case ifRange
    case location
    case connection
    case setCookie
    case retryAfter
    case authorization
    case cacheControl
    case contentRange
    case ifNoneMatch
    case lastModified
    case contentLength
    case contentEncoding
    case contentLocation
    case ifModifiedSince
    case transferEncoding
    case ifUnmodifiedSince
    case proxyAuthorization
    case te
    case trailer
    case upgrade
    case keepAlive
    case proxyConnection
    case proxyAuthenticate

    /// The field's name as registered (RFC 9110 §18.4 and RFC 9111 §8.2).
    public var name: StaticString {
        switch self {
        case .age: "Age"
        case .via: "Via"
        case .date: "Date"
        case .etag: "ETag"
        case .host: "Host"
        case .vary: "Vary"
        case .range: "Range"
        case .pragma: "Pragma"
        case .expires: "Expires"
        case .ifMatch: "If-Match"
        case .ifRange: "If-Range"
        case .location: "Location"
        case .connection: "Connection"
        case .setCookie: "Set-Cookie"
        case .retryAfter: "Retry-After"
        case .authorization: "Authorization"
        case .cacheControl: "Cache-Control"
        case .contentRange: "Content-Range"
        case .ifNoneMatch: "If-None-Match"
        case .lastModified: "Last-Modified"
        case .contentLength: "Content-Length"
        case .contentEncoding: "Content-Encoding"
        case .contentLocation: "Content-Location"
        case .ifModifiedSince: "If-Modified-Since"
        case .transferEncoding: "Transfer-Encoding"
        case .ifUnmodifiedSince: "If-Unmodified-Since"
        case .proxyAuthorization: "Proxy-Authorization"
        case .te: "TE"
        case .trailer: "Trailer"
        case .upgrade: "Upgrade"
        case .keepAlive: "Keep-Alive"
        case .proxyConnection: "Proxy-Connection"
        case .proxyAuthenticate: "Proxy-Authenticate"
        }
    }

    /// The field's bit in ``HTTPHeaders``' set of names present.
    @inlinable @inline(__always)
    var bit: UInt64 { 1 << UInt64(rawValue) }

    /// The known field named `name` (any case), nil for any other name: this runs for every
    /// field parsed. The name is read eight bytes at a time with bit 0x20 set in each byte that
    /// has bit 0x40, which folds the letters' case and leaves `-` as it is, and compared with the
    /// names of its length read the same way (the constants below; a test checks each against
    /// ``name``). Only a letter's two cases fold onto it, and only `-` itself is `-`: setting 0x20
    /// in every byte would also read a CR (0x0D) as `-`, so a name that is not a token
    /// (RFC 9110 §5.6.2) could pass for `Set-Cookie` or `Content-Length`.
    public init?(name: UnsafeRawBufferPointer) {
        guard let field = KnownField.match(name) else { return nil }
        self = field
    }

    private static func match(_ name: UnsafeRawBufferPointer) -> KnownField? {
        let count = name.count
        guard count >= 2, count <= 19, let base = name.baseAddress else { return nil }
        let w0 = KnownField.chunk(base, count: count < 8 ? count : 8)
        switch count {
        case 2:
            if w0 == 0x2020_2020_2020_6574 { return .te }  // te
        case 3:
            if w0 == 0x2020_2020_2065_6761 { return .age }  // age
            if w0 == 0x2020_2020_2061_6976 { return .via }  // via
        case 4:
            if w0 == 0x6574_6164_6574_6164 { return .date }  // date
            if w0 == 0x6761_7465_6761_7465 { return .etag }  // etag
            if w0 == 0x7473_6f68_7473_6f68 { return .host }  // host
            if w0 == 0x7972_6176_7972_6176 { return .vary }  // vary
        case 5:
            if w0 == 0x6567_6e61_676e_6172 { return .range }  // range
        case 6:
            if w0 == 0x616d_6761_6761_7270 { return .pragma }  // pragma
        case 7:
            if w0 == 0x7365_7269_6970_7865 { return .expires }  // expires
            if w0 == 0x7265_6c69_6961_7274 { return .trailer }  // trailer
            if w0 == 0x6564_6172_7267_7075 { return .upgrade }  // upgrade
        case 8:
            if w0 == 0x6863_7461_6d2d_6669 { return .ifMatch }  // if-match
            if w0 == 0x6567_6e61_722d_6669 { return .ifRange }  // if-range
            if w0 == 0x6e6f_6974_6163_6f6c { return .location }  // location
        case 10:
            if w0 == 0x6974_6365_6e6e_6f63 && KnownField.chunk(base + 8, count: 2) == 0x2020_2020_2020_6e6f {
                return .connection
            }  // connection
            if w0 == 0x6b6f_6f63_2d74_6573 && KnownField.chunk(base + 8, count: 2) == 0x2020_2020_2020_6569 {
                return .setCookie
            }  // set-cookie
            if w0 == 0x696c_612d_7065_656b && KnownField.chunk(base + 8, count: 2) == 0x2020_2020_2020_6576 {
                return .keepAlive
            }  // keep-alive
        case 11:
            if w0 == 0x6661_2d79_7274_6572 && KnownField.chunk(base + 8, count: 3) == 0x2020_2020_2072_6574 {
                return .retryAfter
            }  // retry-after
        case 13:
            if w0 == 0x7a69_726f_6874_7561 && KnownField.chunk(base + 8, count: 5) == 0x6e6f_6974_6f69_7461 {
                return .authorization
            }  // authorization
            if w0 == 0x6f63_2d65_6863_6163 && KnownField.chunk(base + 8, count: 5) == 0x6c6f_7274_6f72_746e {
                return .cacheControl
            }  // cache-control
            if w0 == 0x2d74_6e65_746e_6f63 && KnownField.chunk(base + 8, count: 5) == 0x6567_6e61_676e_6172 {
                return .contentRange
            }  // content-range
            if w0 == 0x2d65_6e6f_6e2d_6669 && KnownField.chunk(base + 8, count: 5) == 0x6863_7461_6374_616d {
                return .ifNoneMatch
            }  // if-none-match
            if w0 == 0x646f_6d2d_7473_616c && KnownField.chunk(base + 8, count: 5) == 0x6465_6966_6569_6669 {
                return .lastModified
            }  // last-modified
        case 14:
            if w0 == 0x2d74_6e65_746e_6f63 && KnownField.chunk(base + 8, count: 6) == 0x6874_676e_676e_656c {
                return .contentLength
            }  // content-length
        case 16:
            if w0 == 0x2d74_6e65_746e_6f63 && KnownField.chunk(base + 8, count: 8) == 0x676e_6964_6f63_6e65 {
                return .contentEncoding
            }  // content-encoding
            if w0 == 0x2d74_6e65_746e_6f63 && KnownField.chunk(base + 8, count: 8) == 0x6e6f_6974_6163_6f6c {
                return .contentLocation
            }  // content-location
            if w0 == 0x6f63_2d79_786f_7270 && KnownField.chunk(base + 8, count: 8) == 0x6e6f_6974_6365_6e6e {
                return .proxyConnection
            }  // proxy-connection
        case 17:
            if w0 == 0x6669_646f_6d2d_6669 && KnownField.chunk(base + 8, count: 8) == 0x636e_6973_2d64_6569
                && KnownField.chunk(base + 16, count: 1) == 0x2020_2020_2020_2065
            {
                return .ifModifiedSince
            }  // if-modified-since
            if w0 == 0x7265_6673_6e61_7274 && KnownField.chunk(base + 8, count: 8) == 0x6e69_646f_636e_652d
                && KnownField.chunk(base + 16, count: 1) == 0x2020_2020_2020_2067
            {
                return .transferEncoding
            }  // transfer-encoding
        case 18:
            if w0 == 0x7561_2d79_786f_7270 && KnownField.chunk(base + 8, count: 8) == 0x6163_6974_6e65_6874
                && KnownField.chunk(base + 16, count: 2) == 0x2020_2020_2020_6574
            {
                return .proxyAuthenticate
            }  // proxy-authenticate
        case 19:
            if w0 == 0x646f_6d6e_752d_6669 && KnownField.chunk(base + 8, count: 8) == 0x6973_2d64_6569_6669
                && KnownField.chunk(base + 16, count: 3) == 0x2020_2020_2065_636e
            {
                return .ifUnmodifiedSince
            }  // if-unmodified-since
            if w0 == 0x7561_2d79_786f_7270 && KnownField.chunk(base + 8, count: 8) == 0x7461_7a69_726f_6874
                && KnownField.chunk(base + 16, count: 3) == 0x2020_2020_206e_6f69
            {
                return .proxyAuthorization
            }  // proxy-authorization
        default: break
        }
        return nil
    }

    /// Up to eight bytes as one word, each byte with bit 0x40 given bit 0x20 too (A-Z read as
    /// a-z): two overlapping four-byte reads for four to seven, fewer bytes padded with 0x20,
    /// little-endian as on every target (the constants are made the same way).
    @inline(__always)
    private static func chunk(_ start: UnsafeRawPointer, count: Int) -> UInt64 {
        @inline(__always) func folded(_ word: UInt64) -> UInt64 { word | (word & 0x4040_4040_4040_4040) >> 1 }
        if count >= 8 { return folded(start.loadUnaligned(as: UInt64.self)) }
        if count >= 4 {
            let low = UInt64(start.loadUnaligned(as: UInt32.self))
            let high = UInt64((start + count - 4).loadUnaligned(as: UInt32.self))
            return folded(low | high << 32)
        }
        var value: UInt64 = 0
        for index in 0..<count { value |= UInt64(start.load(fromByteOffset: index, as: UInt8.self)) << (8 * UInt64(index)) }
        return folded(value) | 0x2020_2020_2020_2020 << (8 * UInt64(count))
    }
}

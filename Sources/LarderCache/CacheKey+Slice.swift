import Glibc
import LarderHTTP

/// The keys of an object stored as fixed slices (`cache.slice_size`, as nginx's slice module).
extension CacheKey {
    /// The marker between an object's key and a slice number. A fragment never reaches a proxy
    /// in a request target (RFC 9110 §7.1), so no request's key can end like a slice's.
    public static let sliceMarker = "#slice="

    /// The key slice `index` of this object is stored under.
    public func slice(_ index: Int) -> CacheKey {
        CacheKey(normalized: url + CacheKey.sliceMarker + String(index))
    }

    /// Whether this is a slice's key: request URLs carry no `#` (``AbsoluteURL`` refuses a
    /// fragment, and key templates may not write one), so any `#` is the marker's.
    public var isSlice: Bool { markerOffset != nil }

    /// The URL of the object this key stores: its own, or the object's for a slice's key. What
    /// a ban's pattern is matched against, so that a glob ending in the URL's own text covers
    /// the object's slices too.
    public var objectURL: String { sliceObjectURL ?? url }

    /// The key of the object this slice's key belongs to, as its URL; nil for any other key.
    var sliceObjectURL: String? {
        guard let offset = markerOffset else { return nil }
        return String(decoding: url.utf8.prefix(offset), as: UTF8.self)
    }

    /// Where the first `#` is in the URL.
    private var markerOffset: Int? {
        // Read in place: `withUTF8` on a copy of the URL retained its storage for each look.
        let offset: Int?? = url.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress, let found = memchr(base, Int32(UInt8(ascii: "#")), bytes.count) else { return nil }
            return UnsafeRawPointer(found) - UnsafeRawPointer(base)
        }
        return offset ?? url.utf8.firstIndex(of: UInt8(ascii: "#")).map { url.utf8.distance(from: url.utf8.startIndex, to: $0) }
    }
}

/// A `Content-Range` field of a 206 (RFC 9110 §14.4): `bytes first-last/complete`.
public struct ContentRange: Sendable, Equatable {
    public let first: Int
    public let last: Int
    /// The complete representation's length.
    public let length: Int

    public init(first: Int, last: Int, length: Int) {
        self.first = first
        self.last = last
        self.length = length
    }

    /// Parses `bytes a-b/n`; nil for anything else (an unknown length `*` included: a slice
    /// needs the whole length).
    public init?(_ text: String) {
        let trimmed = ASCII.trimOWS(text[...])
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-"), let slash = spec.firstIndex(of: "/"), dash < slash else { return nil }
        func number(_ digits: Substring) -> Int? {
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(digits)
        }
        guard let first = number(spec[..<dash]), let last = number(spec[spec.index(after: dash)..<slash]),
            let length = number(spec[spec.index(after: slash)...]), first <= last, last < length
        else { return nil }
        self.init(first: first, last: last, length: length)
    }

    public var fieldValue: String { "bytes \(first)-\(last)/\(length)" }

    /// Whether this is exactly slice `first / size` of the object (the last slice ends at the
    /// object's end).
    public func isSlice(of size: Int) -> Bool {
        size > 0 && first % size == 0 && last == min(first + size - 1, length - 1)
    }

    /// The indexes of the slices of `size` bytes that lie wholly inside this range (the
    /// object's last slice ends at its length); nil when none does.
    public func wholeSlices(of size: Int) -> ClosedRange<Int>? {
        guard size > 0 else { return nil }
        let firstIndex = first / size + (first % size == 0 ? 0 : 1)
        let lastIndex = last == length - 1 ? last / size : (last + 1) / size - 1
        return firstIndex <= lastIndex ? firstIndex...lastIndex : nil
    }
}

import LarderCache
import LarderHTTP

/// What one client's response from a sliced object still needs: which slice comes next and
/// which of its bytes, and whether each slice belongs to the object the response began with.
///
/// A pure value: every step takes what was found (a slice's range and validator) and says
/// what to do; ``ClientConnection`` carries it out (tiers, slice fills, the output).
struct SlicePlan: Equatable {
    /// Where the response is.
    enum Stage: Equatable {
        /// No slice seen yet: the object's length (and so the answer) is not known.
        case locating
        /// The head is decided; slices are being sent.
        case sending
        /// Every byte the client asked for is queued (or the answer needs no body).
        case complete
    }

    /// What the first slice found decides the client gets.
    enum Answer: Equatable {
        /// 200 with the whole object.
        case whole(length: Int)
        /// 206 with `first...last` of `length`.
        case partial(first: Int, last: Int, length: Int)
        /// 416 (RFC 9110 §15.5.17).
        case unsatisfiable(length: Int)
    }

    /// What a later slice turned out to be.
    enum Check: Equatable {
        /// Same object: send its bytes.
        case consistent
        /// Another object (its validator or length changed): every stored slice is outdated.
        case changed
        /// Not the slice asked for (the origin sent another range).
        case misplaced
    }

    let size: Int
    private(set) var stage = Stage.locating
    /// The next byte the client needs (before locating: where its range probably starts).
    private(set) var next: Int
    /// The last byte the client needs, once located.
    private(set) var last = 0
    private(set) var length = 0
    /// The first slice's validator: its strong ETag, else its Last-Modified text, else nil
    /// (slices of such an object are never stored, only passed through).
    private(set) var validator: String?

    /// `firstByte`: where the client's range starts, when its Range says (`bytes=N-…`); the
    /// slice holding it is fetched first. Otherwise 0.
    /// Offline or only-if-cached: slices come from the tiers or not at all.
    let cachedOnly: Bool

    init(size: Int, firstByte: Int, cachedOnly: Bool = false) {
        precondition(size > 0)
        self.size = size
        self.cachedOnly = cachedOnly
        next = max(0, firstByte)
    }

    /// Where the client's Range starts, when it is one `bytes=N-…` range (else 0: a suffix
    /// range, several ranges or none start from the first slice, which tells the length).
    static func firstByte(ofRange header: String?) -> Int {
        guard let header else { return 0 }
        let text = ASCII.trimOWS(header[...])
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return 0 }
        let spec = text.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return 0 }
        let digits = ASCII.trimOWS(spec[..<dash])
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return 0 }
        return Int(digits) ?? 0
    }

    /// The validator slices of one object share (RFC 9110 §8.8.1: a strong ETag identifies the
    /// bytes; a Last-Modified date is the weaker fallback nginx's slice module also accepts).
    static func validator(of headers: HTTPHeaders) -> String? {
        if let etag = headers["ETag"], !etag.hasPrefix("W/") { return "etag " + etag }
        if let modified = headers["Last-Modified"] { return "date " + modified }
        return nil
    }

    /// Before locating: look at slice `index` first instead (the first slice is stored though
    /// the one holding the client's range is not; its length may show the range needs none).
    mutating func look(at index: Int) {
        precondition(stage == .locating)
        next = index * size
    }

    /// The slice holding the next byte.
    var sliceIndex: Int { next / size }

    /// The byte range slice `index` covers, clipped to the length once it is known.
    func bounds(of index: Int) -> (first: Int, last: Int) {
        let first = index * size
        let last = first + size - 1
        return (first, stage == .locating ? last : min(last, length - 1))
    }

    /// The Range field asking the origin for slice `index`.
    func rangeField(for index: Int) -> String {
        let bounds = bounds(of: index)
        return "bytes=\(bounds.first)-\(bounds.last)"
    }

    /// The first slice found (stored or fetched): fixes the object's length and validator and,
    /// with the client's Range resolved against them (`resolution`), the answer.
    mutating func locate(length: Int, validator: String?, resolution: RangeRequest.Resolution) -> Answer {
        precondition(stage == .locating)
        self.length = length
        self.validator = validator
        switch resolution {
        case .full:
            next = 0
            last = length - 1
            stage = length == 0 ? .complete : .sending
            return .whole(length: length)
        case .partial(let first, let last):
            next = first
            self.last = last
            stage = .sending
            return .partial(first: first, last: last, length: length)
        case .unsatisfiable:
            stage = .complete
            return .unsatisfiable(length: length)
        }
    }

    /// Checks a slice (its Content-Range and validator) against the object being sent.
    func check(_ range: ContentRange, validator: String?) -> Check {
        guard range.length == length, validator == self.validator else { return .changed }
        let bounds = bounds(of: range.first / size)
        guard range.first == bounds.first, range.last == bounds.last, range.first / size == sliceIndex else { return .misplaced }
        return .consistent
    }

    /// The part of slice `sliceIndex` the client needs: offset into the slice, and count.
    var needed: (offset: Int, count: Int) {
        let bounds = bounds(of: sliceIndex)
        return (next - bounds.first, min(last, bounds.last) - next + 1)
    }

    /// `count` more bytes are queued.
    mutating func sent(_ count: Int) {
        precondition(stage == .sending && count > 0)
        next += count
        if next > last { stage = .complete }
    }
}

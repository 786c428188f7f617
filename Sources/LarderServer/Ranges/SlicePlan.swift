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

    /// What an origin's answer to a slice request is, read from its head (RFC 9110 §14.4,
    /// §15.3.7). Stored slices are always ``part``.
    enum Reply: Equatable {
        /// A single-part 206 whose body is exactly bytes `range` of the object.
        case part(ContentRange)
        /// A 200: the whole object, of `length` bytes when its framing says.
        case whole(length: Int?)
        /// A 206 no answer may take: multipart/byteranges (one range was asked), no valid
        /// Content-Range, or a body length unlike its Content-Range.
        case unusable
        /// Any other status (an error, a 416): it says nothing of the object's bytes.
        case other(status: Int)

        /// `bodyLength`: what the response's framing says its body holds, if it says.
        init(status: Int, headers: HTTPHeaders, bodyLength: Int?) {
            switch status {
            case 200:
                self = .whole(length: bodyLength)
            case 206:
                let multipart = headers["Content-Type"].map { ASCII.trimOWS($0[...]).lowercased().hasPrefix("multipart/") } ?? false
                guard !multipart, let range = headers["Content-Range"].flatMap(ContentRange.init),
                    bodyLength == nil || bodyLength == range.last - range.first + 1
                else {
                    self = .unusable
                    return
                }
                self = .part(range)
            default:
                self = .other(status: status)
            }
        }

        /// A slice fill's 206 (`forwarded`, before it is judged): one that covers the whole
        /// object becomes the 200 it is (stored under the object's own key, RFC 9111 §3.4);
        /// one that is one range of the object, its body that range, is returned, to be stored
        /// as the slice asked for or as the whole slices inside it (``StoragePlan``). Anything
        /// else is never stored; its readers take what ``Reply`` says it holds.
        static func storableRange(of forwarded: inout ResponseHead, contentLength: inout Int?) -> ContentRange? {
            guard forwarded.status == 206, let range = forwarded.headers["Content-Range"].flatMap(ContentRange.init) else {
                return nil
            }
            // RFC 9110 §14.4: the body is exactly the range. A body not framed by a length is
            // held to that count (one longer or shorter fails, unstored); a length unlike it,
            // or a multipart body, makes the answer one no slice is taken from.
            if contentLength == nil { contentLength = range.last - range.first + 1 }
            guard case .part = Reply(status: 206, headers: forwarded.headers, bodyLength: contentLength) else { return nil }
            if range.first == 0 && range.last == range.length - 1 {
                forwarded.status = 200
                forwarded.reason = HTTPStatus.reason(200)
                forwarded.headers.remove("Content-Range")
                return nil
            }
            return range
        }

        /// The range of a 206 to the client's own Range, passed upstream as it came, whose
        /// whole slices may be stored (RFC 9111 §3.3): one range of its object, its body framed
        /// by a Content-Length that is exactly that range (RFC 9110 §14.4). Unlike a slice
        /// fill's, the answer goes to its client as it came: nothing in it is changed, and a
        /// body of unknown length is not stored.
        static func passedRange(of forwarded: ResponseHead, contentLength: Int?) -> ContentRange? {
            guard forwarded.status == 206, let contentLength,
                case .part(let range) = Reply(status: 206, headers: forwarded.headers, bodyLength: contentLength)
            else { return nil }
            return range
        }
    }

    /// Bytes of an answer's body to send: `count` from `offset`.
    struct Part: Equatable {
        let offset: Int
        let count: Int
    }

    /// What to do with an answer to a slice request (``take(_:validator:resolve:)``).
    enum Take: Equatable {
        /// The first slice fixed the head (`answer`); send `part` of it, if any (none: the
        /// answer needs no body, or its first byte is in another slice).
        case located(Answer, part: Part?)
        /// Send `part` of it.
        case serve(Part)
        /// Before any head: answer with this response as an ordinary fill's (a 200, the
        /// client's range cut from it; another status as it came).
        case ordinary
        /// Before any head: nothing here to use; ask the origin for the client's own request.
        case pass
        /// The object changed (validator or length): its stored slices are outdated.
        case changed
        /// After the head: a capped answer to the request for the whole slice (this client's,
        /// or another's it joined) ends before the next byte this client needs (its range starts
        /// inside the slice). Nothing of it is sent; the rest of the slice is asked for
        /// (``ask(for:)``, bounded like every follow-up).
        case askAgain
        /// After the head: the answer cannot go on.
        case cut(String)
    }

    let size: Int
    private(set) var stage = Stage.locating
    /// The next byte the client needs (before locating: where its range probably starts).
    private(set) var next: Int
    /// The last byte the client needs, once located.
    private(set) var last = 0
    private(set) var length = 0
    /// The first slice's validator: its strong ETag, else its Last-Modified text, else nil
    /// (slices of such an object are never stored, and an answer is never combined from
    /// several of them: the client's request is passed through).
    private(set) var validator: String?
    /// The slice requested last, and how many requests were made for it.
    private var requestedSlice = -1
    private var requestCount = 0

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

    /// What identifies the object an answer's slices belong to: its strong ETag, else its
    /// Last-Modified text (RFC 9110 §8.8.1); every slice of one answer must carry the same.
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

    /// Requests made for one slice at most: the first, and follow-ups for the rest of a slice
    /// an origin sent in parts (a server that caps ranges). Each must hold the next byte
    /// (``take(_:validator:resolve:)``), so an origin sending a byte at a time cannot hold
    /// the answer longer or make Larder ask more than this per slice.
    static let maxRequestsPerSlice = 16

    /// The Range field of the next request for slice `index`, counted: the whole slice, or,
    /// when that slice was asked for already and the next byte needed is inside it (an answer
    /// held only part of it), the rest of it from there. Nil past ``maxRequestsPerSlice``.
    mutating func ask(for index: Int) -> String? {
        let bounds = bounds(of: index)
        var first = bounds.first
        if requestedSlice == index {
            guard requestCount < SlicePlan.maxRequestsPerSlice else { return nil }
            requestCount += 1
            if stage == .sending, next > bounds.first, next <= bounds.last { first = next }
        } else {
            requestedSlice = index
            requestCount = 1
        }
        return "bytes=\(first)-\(bounds.last)"
    }

    /// Whether the next request for slice `index` asks for its rest only (not the whole slice,
    /// so it is not one any other request for the slice could share).
    func resumes(_ index: Int) -> Bool {
        requestedSlice == index && stage == .sending && next > bounds(of: index).first && next <= bounds(of: index).last
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

    /// Takes an answer to the request for slice `sliceIndex` (stored, or from the origin):
    /// the first one locates the object (its length, `validator`, and the client's range
    /// resolved against that length by `resolve`); later ones must be of the same object.
    /// Only bytes at the positions the answer's Content-Range names, holding all the client
    /// needs of the slice, are sent (RFC 9110 §14.4); anything else falls back to the origin
    /// before the head and cuts the answer short after it.
    mutating func take(_ reply: Reply, validator: String?, resolve: (Int) -> RangeRequest.Resolution) -> Take {
        if stage == .locating {
            guard case .part(let range) = reply else { return reply == .unusable ? .pass : .ordinary }
            let asked = sliceIndex
            var located = self
            let answer = located.locate(length: range.length, validator: validator, resolution: resolve(range.length))
            guard located.stage == .sending else {
                self = located
                return .located(answer, part: nil)
            }
            // RFC 9110 §15.3.7.3: parts are combined only under one strong validator. Without
            // one, an answer that lacks some of the client's bytes cannot be completed from
            // other requests (the object may change between them): one request asks for it all.
            if validator == nil, located.part(of: range).map({ located.next + $0.count <= located.last }) ?? true {
                return .pass
            }
            if let part = located.part(of: range) {
                self = located
                return .located(answer, part: part)
            }
            // The slice asked for, exactly, but the client's first byte is in another one.
            guard range == located.slice(asked, of: range.length) else { return .pass }
            self = located
            return .located(answer, part: nil)
        }
        let range: ContentRange
        switch reply {
        case .part(let part):
            range = part
        case .whole(let wholeLength):
            guard validator == self.validator else { return .changed }
            guard let wholeLength else { return .cut("the origin answered a slice request with a 200 of unknown length") }
            range = ContentRange(first: 0, last: wholeLength - 1, length: wholeLength)
        case .unusable:
            return .cut("the origin answered a slice request with a 206 that is not one range of its length")
        case .other(let status):
            return (200..<300).contains(status) && validator != self.validator
                ? .changed : .cut("the origin answered a slice request with \(status)")
        }
        guard range.length == length, validator == self.validator else { return .changed }
        guard let part = part(of: range) else {
            // Only an answer to the first request for the slice, which asked from its first byte.
            if range.last < next, range.first == bounds(of: sliceIndex).first, requestedSlice == sliceIndex, requestCount == 1 {
                return .askAgain
            }
            return .cut("the origin answered a slice request with bytes \(range.first)-\(range.last), not \(next)-")
        }
        return .serve(part)
    }

    /// The bytes to send from an answer holding `range`: from the next byte needed to the
    /// last one it holds (or the client needs), provided it holds the next byte; nil otherwise.
    /// An answer that ends before the client's need of that slice does (a server that caps
    /// ranges) leaves the rest to a follow-up request (``ask(for:)``).
    func part(of range: ContentRange) -> Part? {
        guard range.length == length, range.first <= next, range.last >= next else { return nil }
        return Part(offset: next - range.first, count: min(last, range.last) - next + 1)
    }

    /// Whether a stored slice `index` holding `range` is that slice as ``size`` cuts the
    /// object: one stored under another `cache.slice_size` (before a reload) is not, and
    /// using it would leave a gap no request for the slice fills.
    func isSlice(_ index: Int, _ range: ContentRange) -> Bool {
        range.length > 0 && range == slice(index, of: range.length)
    }

    /// The Content-Range a complete slice `index` of an object of `length` bytes has.
    private func slice(_ index: Int, of length: Int) -> ContentRange {
        let first = index * size
        return ContentRange(first: first, last: min(first + size - 1, length - 1), length: length)
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

import LarderHTTP

/// What becomes of an origin's answer in the cache: the one place that decides whether it is
/// stored, where, and how, or what it does to the response already stored (a 304's merge, a
/// HEAD's update). The HTTP rules (RFC 9111 §3, §4.3, §4.4, ``ResponseAdmission``), the slice
/// rules, the disk tier's limits and the doorkeeper meet here; the fill only carries the plan
/// out through the ``StoreSink`` that
/// ``TieredCache/open(_:head:cacheControl:entry:replacing:)`` gives it, and never picks a
/// tier. A value: deciding allocates nothing.
public struct StoragePlan: Sendable, Equatable {
    /// What happens to the cache.
    public enum Action: Sendable, Equatable {
        /// Nothing is stored (``Skip`` says why); a stored response may still be outdated by
        /// the fill once it knows nothing replaces it.
        case skip(Skip)
        /// Kept whole and stored once complete: in the memory tier up to
        /// `memory.max_object_bytes`, appended to the disk tier as a segment record. A body of
        /// unknown length that outgrows ``ResponseAdmission/wholeLimit(maxMemoryObject:disk:)``
        /// is streamed from there on.
        case whole
        /// Streamed to a disk file of its own as it arrives.
        case streamed
        /// A whole 200 larger than a slice, stored on disk slice by slice.
        case slices
        /// A slice fill's 206 holding exactly the slice asked for, stored as that slice.
        case slice(ContentRange)
        /// A slice fill's 206 of another range of the object (a server that caps ranges, or
        /// answers a range of its choosing), or the 206 to a client's own Range passed upstream
        /// as it came: each whole slice inside it is stored as that slice (RFC 9111 §3.3), to
        /// be combined with the others under the same strong validator (§3.4). The bytes
        /// outside them are not kept.
        case slicesWithin(ContentRange)
        /// A slice fill's 206 of part of the slice asked for (a server that caps ranges): the
        /// first part starts the slice's one entry, and any answer holding the byte it waits
        /// for continues it, under the same validators (``SliceAssemblies``, RFC 9111 §3.4).
        case slicePart(ContentRange)
        /// A 304 to Larder's validation: the stored response, freshened, answers (§4.3.4).
        case merge
        /// The origin erred and the stored fallback answers instead (RFC 5861 §4).
        case serveStale
        /// A HEAD's 200 matches the stored GET response: its fields are updated as by a 304
        /// (RFC 9111 §4.3.5, §3.2).
        case updateFromHead
        /// A HEAD's 200 does not match the stored GET response: it is no longer used (§4.3.5).
        case outdateFromHead
    }

    /// Whether a HEAD's answer updates or outdates the stored response.
    public var isHeadUpdate: Bool { action == .updateFromHead || action == .outdateFromHead }

    /// Whether the stored response a conditional request was sent for goes, once it is known
    /// whether the answer is stored (`stored`: a sink opened for it): a new response that is
    /// not stored outdates it (RFC 9111 §4.3.3), unless the rules keep it (an answer to the
    /// client's own preconditions, a failure while a success is kept) or a HEAD's answer
    /// already updated or outdated it (§4.3.5). The fill asks when the plan stores nothing,
    /// ``TieredCache/open(_:head:cacheControl:entry:replacing:)`` when the tier refuses the sink.
    public func outdatesValidated(stored: Bool) -> Bool { !stored && !admission.keepsStored && !isHeadUpdate }

    /// Why nothing is stored.
    public enum Skip: Sendable, Equatable {
        /// The HTTP rules, the route's policy, or the tiers' limits keep it out.
        case rules
        /// `cache.admission = "second_request"` keeps a new entry out until asked for again.
        case deferred
        /// A slice request's other answer (a 416, or a range the origin chose that holds no
        /// whole slice): it describes that request, not the object.
        case otherRange
        /// A slice without a strong validator to combine it by, or an object over
        /// `disk.max_object_bytes`, or no disk tier to hold it.
        case sliceRefused
    }

    /// What the fill was for, beyond the admission's request: its slice, if any, and the
    /// slice size whole responses are cut into (0: never).
    public struct Slicing: Sendable, Equatable {
        /// The fill asked for one slice (its request carries the slice's Range).
        public var sliceFill: Bool
        /// `cache.slice_size`.
        public var size: Int
        /// The fill sends a client's own Range upstream as it came: a 206 to it keeps the whole
        /// slices inside it and nothing else (the client gets the answer as it came).
        public var rangeFill: Bool

        public init(sliceFill: Bool = false, size: Int = 0, rangeFill: Bool = false) {
            self.sliceFill = sliceFill
            self.size = size
            self.rangeFill = rangeFill
        }
    }

    /// The origin's answer as the plan reads it.
    public struct Answer {
        /// The head as forwarded (hop-by-hop fields removed); a slice fill's 206 covering the
        /// whole object already turned into its 200.
        public var head: ResponseHead
        public var cacheControl: CacheControl
        /// The length that frames the body (nil: unknown, or no body).
        public var contentLength: Int?
        /// The Content-Length the origin sent, even where no body follows (a HEAD's).
        public var announcedLength: Int?
        /// The range of a slice fill's 206, or of a range fill's (``Slicing/rangeFill``): one
        /// range of its object, the body exactly that range (the slice asked for, another the
        /// origin chose, or the client's own).
        public var sliceRange: ContentRange?

        public init(
            head: ResponseHead, cacheControl: CacheControl, contentLength: Int?, announcedLength: Int? = nil,
            sliceRange: ContentRange? = nil
        ) {
            self.head = head
            self.cacheControl = cacheControl
            self.contentLength = contentLength
            self.announcedLength = announcedLength
            self.sliceRange = sliceRange
        }
    }

    public var action: Action
    /// The most the fill keeps whole (``ResponseAdmission/wholeLimit(maxMemoryObject:disk:)``):
    /// a body of unknown length kept whole past it is streamed from there on.
    public var wholeLimit: Int
    /// The HTTP rules' verdict on the answer: shared or not, what it invalidates, its lifetime,
    /// whether it keeps the stored response, whether its digest is checked.
    public var admission: ResponseAdmission

    /// Whether the fill keeps the body it receives to store it.
    public var stores: Bool {
        switch action {
        case .whole, .streamed, .slices, .slice, .slicesWithin, .slicePart: true
        default: false
        }
    }

    /// Decides for `answer` to `request`, with the disk tier as it is (nil: none), at `now`.
    /// `admitted` is the doorkeeper, asked only about a new entry that would otherwise be
    /// stored, with the body's declared length.
    public static func decide(
        _ request: ResponseAdmission.Request, answer: Answer, slicing: Slicing, disk: ResponseAdmission.DiskTier?, now: Double,
        admitted: (Int?) -> Bool
    ) -> StoragePlan {
        let head = answer.head
        // A slice is judged as the whole response it is part of would be; any other head as it
        // is, without a copy made to change nothing.
        var admission: ResponseAdmission
        if answer.sliceRange == nil {
            admission = ResponseAdmission.decide(
                request, head: head, contentLength: answer.contentLength, cacheControl: answer.cacheControl, disk: disk, now: now)
        } else {
            var judged = head
            judged.status = 200
            admission = ResponseAdmission.decide(
                request, head: judged, contentLength: answer.contentLength, cacheControl: answer.cacheControl, disk: disk, now: now)
        }
        let wholeLimit = ResponseAdmission.wholeLimit(maxMemoryObject: request.maxMemoryObject, disk: disk)
        switch admission.verdict {
        case .merge: return StoragePlan(action: .merge, wholeLimit: wholeLimit, admission: admission)
        case .serveStale: return StoragePlan(action: .serveStale, wholeLimit: wholeLimit, admission: admission)
        case .forward: break
        }
        if admission.freshensStoredFromHead, head.status == 200, let stored = request.validating ?? request.fallback {
            let matches = headMatches(stored, head: head, announcedLength: answer.announcedLength)
            if matches, !headMayUpdate(request, answer: answer) {
                // Its fields would reach every client the stored GET answers: this one
                // client's answer (a cookie, a private or authorized response) leaves it as it is.
                admission.freshensStoredFromHead = false
                admission.storage = .none
                admission.keepsStored = true
                return StoragePlan(action: .skip(.rules), wholeLimit: wholeLimit, admission: admission)
            }
            return StoragePlan(action: matches ? .updateFromHead : .outdateFromHead, wholeLimit: wholeLimit, admission: admission)
        }
        if slicing.sliceFill, answer.sliceRange == nil, head.status != 200 {
            admission.storage = .none
            return StoragePlan(action: .skip(.otherRange), wholeLimit: wholeLimit, admission: admission)
        }
        guard admission.storage != .none else {
            return StoragePlan(action: .skip(.rules), wholeLimit: wholeLimit, admission: admission)
        }
        // Only new GET entries wait for a second request: a response that replaces a stored
        // one (validation, stale fallback) already earned its place, and slices (a slice fill's,
        // or those inside a 206) follow the slice rules alone (a doorkeeper per slice would
        // store objects in pieces).
        let newEntry =
            request.method == .get && request.validating == nil && request.fallback == nil && !slicing.sliceFill
            && answer.sliceRange == nil
        if newEntry, !admitted(answer.contentLength) {
            admission.storage = .none
            return StoragePlan(action: .skip(.deferred), wholeLimit: wholeLimit, admission: admission)
        }
        let maxDiskObject = disk?.maxObjectBytes
        if let range = answer.sliceRange {
            // A range fill's answer is the client's own: stored or not, it never replaces
            // or outdates the whole response stored for the object.
            if slicing.rangeFill { admission.keepsStored = true }
            let exact = !slicing.rangeFill && range.isSlice(of: slicing.size)
            let within = range.wholeSlices(of: slicing.size) != nil
            // Part of one slice, to be completed by the answers to the requests for its rest.
            let part = slicing.sliceFill && !within && slicing.size > 0 && range.first / slicing.size == range.last / slicing.size
            // (No slice size: no disk tier to hold slices, refused below.)
            guard exact || slicing.size == 0 || within || part else {
                admission.storage = .none
                return StoragePlan(action: .skip(.otherRange), wholeLimit: wholeLimit, admission: admission)
            }
            // Slices are combined only when they share a validator, and live on disk only.
            guard hasSliceValidator(head.headers), let maxDiskObject, Int64(range.length) <= maxDiskObject else {
                return StoragePlan(action: .skip(.sliceRefused), wholeLimit: wholeLimit, admission: admission)
            }
            let action: Action = exact ? .slice(range) : part ? .slicePart(range) : .slicesWithin(range)
            return StoragePlan(action: action, wholeLimit: wholeLimit, admission: admission)
        }
        // A digest covers the whole body: a route that checks one never stores it in slices.
        if slicing.size > 0, !request.contentAddressed, request.method == .get, head.status == 200,
            let length = answer.contentLength, length > slicing.size, hasSliceValidator(head.headers),
            let maxDiskObject, Int64(length) <= maxDiskObject
        {
            return StoragePlan(action: .slices, wholeLimit: wholeLimit, admission: admission)
        }
        return StoragePlan(action: admission.storage == .whole ? .whole : .streamed, wholeLimit: wholeLimit, admission: admission)
    }

    /// RFC 9111 §4.3.5: a HEAD's 200 matches the stored GET response when both carry the same
    /// validators (ETag and Last-Modified; one carried on one side only is a mismatch, as it
    /// may describe another representation) and, when the HEAD answer has a Content-Length,
    /// the stored body is that long. A stored answer other than a 200 never matches.
    public static func headMatches(_ stored: StoredResponse, head: ResponseHead, announcedLength: Int?) -> Bool {
        guard stored.status == 200 else { return false }
        guard stored.etag == head.headers[.etag] else { return false }
        guard stored.lastModified == head.headers.date(.lastModified) else { return false }
        return announcedLength.map { $0 == stored.bodyLength } ?? true
    }

    /// Whether a matching HEAD answer may update the stored GET with its fields (RFC 9111 §3.2):
    /// only when a shared cache could store them (§3, §3.5, §5.2.2.5, §5.2.2.7, §5.2.1.5), and
    /// never with a `Set-Cookie`, which Larder stores for no one.
    static func headMayUpdate(_ request: ResponseAdmission.Request, answer: Answer) -> Bool {
        guard !request.directives.noStore else { return false }
        return Shareability.allowsSharing(
            status: answer.head.status, responseHeaders: answer.head.headers, fillRequest: request.headers, dedupAlways: true,
            responseCacheControl: answer.cacheControl)
    }

    /// Whether slices with these fields may be stored and combined with others later: only
    /// under a strong validator (RFC 9111 §3.4), a strong ETag, or a Last-Modified strong under
    /// RFC 9110 §8.8.2.2 (at least 60 seconds before the response's Date: a change within that
    /// time may keep the same date).
    public static func hasSliceValidator(_ headers: HTTPHeaders) -> Bool {
        if let etag = headers[.etag], !etag.hasPrefix("W/") { return true }
        guard let modified = headers.date(.lastModified), let date = headers.date(.date) else { return false }
        return date - modified >= 60
    }
}

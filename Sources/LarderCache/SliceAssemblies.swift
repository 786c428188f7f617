import LarderHTTP
import LarderIO

/// Slices an origin sends in parts (a server that caps ranges: each answer to a slice's
/// follow-up requests holds the next part of it), put back together into the slice's entry as
/// the parts arrive. One assembly per slice, whichever clients' requests its parts answer: a
/// part from the slice's first byte starts it when none is under way, and any part that holds
/// the byte its write waits for, under the same validators and object length (RFC 9111 §3.4:
/// parts combine only under one strong validator), joins it, at its head, even while the part
/// before it has not ended. Every joined part feeds the write the bytes it holds from that
/// byte on; bytes at positions already written are skipped, so parts of several clients may
/// overlap or race without a byte ever written twice, out of place, or from another
/// representation. A part that may not join (another validator, a gap, nothing new, outside
/// the slice) stores nothing and leaves the assembly as it is: no client's answer replaces or
/// spoils another's. The part that writes the slice's last byte completes the entry when its
/// answer ends well; one that sends more than its range drops the assembly.
///
/// Bounded: at most ``maxWaiting`` assemblies, none kept once no byte came for ``maxWait``
/// seconds (each loop's sweep calls ``TieredCache/expireSliceParts(now:)``).
///
/// State: the table behind its lock; each assembly's progress and write behind its own (a
/// slice's parts may arrive on different loops). The table's lock may be held while an
/// assembly's is taken, never the other way round.
public final class SliceAssemblies: Sendable {
    /// Where one slice's assembly stands, and the rules its parts follow: a value, so that each
    /// rule is decided without the disk write or a lock (``Assembly`` carries them out).
    struct Progress: Equatable {
        /// The whole slice, as its entry's Content-Range says.
        let slice: ContentRange
        let etag: String?
        let lastModified: String?
        /// The object position of the next byte the write waits for.
        private(set) var next: Int
        /// `next` as last looked at (``stalled(now:)``), and since when it stands there.
        private var seen: Int
        private(set) var since: Double

        init(slice: ContentRange, headers: HTTPHeaders, now: Double) {
            self.slice = slice
            etag = headers["ETag"]
            lastModified = headers["Last-Modified"]
            next = slice.first
            seen = next
            since = now
        }

        /// Why a part may not join.
        enum Refusal: Equatable {
            /// Another ETag, Last-Modified or object length: another representation.
            case otherRepresentation
            /// Bytes outside the slice.
            case outsideSlice
            /// It starts past the byte the write waits for.
            case gap
            /// Every byte it holds is written already.
            case nothingNew
        }

        /// Whether a part holding `range`, with these fields, may join (nil), or why not.
        func refusal(of range: ContentRange, headers: HTTPHeaders) -> Refusal? {
            guard range.length == slice.length, headers["ETag"] == etag, headers["Last-Modified"] == lastModified else {
                return .otherRepresentation
            }
            guard range.first >= slice.first, range.last <= slice.last else { return .outsideSlice }
            guard range.first <= next else { return .gap }
            guard range.last >= next else { return .nothingNew }
            return nil
        }

        /// What becomes of a part's `count` bytes at object position `position`.
        enum Feed: Equatable {
            /// The chunk's bytes from `offset` on are the next ones: written.
            case write(offset: Int)
            /// None of them is the next byte (already written, or past it).
            case skip
            /// They go past the end of the part's range (`partEnd`, exclusive): its answer is
            /// not the range it said, and the assembly is dropped.
            case overrun
        }

        /// A part's `count` bytes at `position`; the part's range ends before `partEnd`.
        mutating func feed(at position: Int, count: Int, partEnd: Int) -> Feed {
            guard position + count <= partEnd else { return .overrun }
            guard position <= next, position + count > next else { return .skip }
            defer { next = position + count }
            return .write(offset: next - position)
        }

        /// Every byte of the slice is written.
        var isComplete: Bool { next == slice.last + 1 }

        /// Whether no byte came for longer than ``SliceAssemblies/maxWait`` at `now`; a byte
        /// that came since the last look starts the wait again from `now`.
        mutating func stalled(now: Double) -> Bool {
            if next != seen {
                seen = next
                since = now
                return false
            }
            return now - since > SliceAssemblies.maxWait
        }
    }

    /// One slice being put back together: its progress and disk write, and the part that
    /// wrote its last byte.
    final class Assembly: Sendable {
        let key: CacheKey
        let write: DiskWrite
        private struct State {
            var progress: Progress
            /// Parts joined so far (each part's token is its number).
            var parts = 0
            /// The part that wrote the last byte: its answer's end completes the entry.
            var completer: Int?
            /// Completed or dropped: nothing more is written.
            var ended = false
        }
        private let state: Locked<State>

        init(key: CacheKey, write: DiskWrite, progress: Progress) {
            self.key = key
            self.write = write
            state = Locked(State(progress: progress))
        }

        /// What became of a part that asked to join.
        enum Joining {
            /// Joined, as part number `token`.
            case joined(token: Int)
            /// It may not join; the assembly goes on without it.
            case refused
            /// The assembly is over (completed, dropped, or stalled just now).
            case over
        }

        /// A part holding `range`, with `headers`, asks to join at `now`.
        func join(_ range: ContentRange, headers: HTTPHeaders, now: Double) -> Joining {
            state.withLock { state in
                guard !state.ended else { return .over }
                if state.progress.stalled(now: now) {
                    state.ended = true
                    write.abort()
                    return .over
                }
                guard state.progress.refusal(of: range, headers: headers) == nil else { return .refused }
                state.parts += 1
                return .joined(token: state.parts)
            }
        }

        /// Part `token`'s `chunk` at `position` (its range ends before `partEnd`). Returns
        /// false when the assembly ended with it (dropped).
        func feed(_ chunk: [UInt8], at position: Int, partEnd: Int, token: Int) -> Bool {
            state.withLock { state in
                guard !state.ended else { return true }
                switch state.progress.feed(at: position, count: chunk.count, partEnd: partEnd) {
                case .skip:
                    return true
                case .overrun:
                    state.ended = true
                    write.abort()
                    return false
                case .write(let offset):
                    write.append(offset == 0 ? chunk : Array(chunk[offset...]))
                    if write.hasFailed {
                        state.ended = true
                        write.abort()
                        return false
                    }
                    if state.progress.isComplete { state.completer = token }
                    return true
                }
            }
        }

        /// Part `token`'s answer ended, well or not. Returns true when the assembly ended
        /// with it: the entry completed by its last byte's part, or dropped because that part
        /// failed or the write did.
        func end(part token: Int, succeeded: Bool) -> Bool {
            state.withLock { state in
                guard !state.ended else { return false }
                if write.hasFailed || (state.completer == token && !succeeded) {
                    state.ended = true
                    write.abort()
                } else if state.completer == token {
                    state.ended = true
                    write.finish(expectedLength: state.progress.slice.last - state.progress.slice.first + 1)
                }
                return state.ended
            }
        }

        /// Whether no byte came for too long at `now` (``Progress/stalled(now:)``): it is dropped.
        func expire(now: Double) -> Bool {
            state.withLock { state in
                guard !state.ended else { return true }
                guard state.progress.stalled(now: now) else { return false }
                state.ended = true
                write.abort()
                return true
            }
        }

        /// Dropped: nothing more is written, and the write goes.
        func drop() {
            state.withLock { state in
                guard !state.ended else { return }
                state.ended = true
                write.abort()
            }
        }

        /// When its last byte came (or its first part's head), for the bound on their number.
        var since: Double { state.withLock { $0.progress.since } }
    }

    /// One answer's part of a slice, joined to the slice's assembly: the storage sink feeds it
    /// the answer's body and tells it the answer's end.
    struct Part {
        let assemblies: SliceAssemblies
        let assembly: Assembly
        let token: Int
        /// The object position of the answer's next byte.
        private(set) var position: Int
        /// The end of the answer's range (exclusive).
        let end: Int

        /// The answer's next bytes.
        mutating func append(_ chunk: [UInt8]) {
            if !assembly.feed(chunk, at: position, partEnd: end, token: token) { assemblies.remove(assembly) }
            position += chunk.count
        }

        /// The answer ended (`succeeded`: its body whole, as its range said).
        func end(succeeded: Bool) {
            if assembly.end(part: token, succeeded: succeeded) { assemblies.remove(assembly) }
        }
    }

    /// The slices being put back together.
    private let assemblies = Locked([CacheKey: Assembly]())

    /// Assemblies at most; past it the one whose last byte came longest ago is dropped.
    static let maxWaiting = 64
    /// Seconds an assembly is kept with no byte coming, between parts or within one.
    static let maxWait = 60.0

    public init() {}

    /// The part an answer holding `range` of slice `slice` (keyed `key`), with `headers`, is:
    /// joined to the slice's assembly when one is under way and the part may join it, else the
    /// first part of a new one when it starts at the slice's first byte (`begin` starts the
    /// slice's write). Nil when it stores nothing.
    func join(
        _ key: CacheKey, slice: ContentRange, range: ContentRange, headers: HTTPHeaders, now: Double, begin: () -> DiskWrite?
    ) -> Part? {
        if let found = assemblies.withLock({ $0[key] }) {
            switch found.join(range, headers: headers, now: now) {
            case .joined(let token):
                return Part(assemblies: self, assembly: found, token: token, position: range.first, end: range.last + 1)
            case .refused:
                return nil
            case .over:
                remove(found)
            }
        }
        guard range.first == slice.first, let write = begin() else { return nil }
        let assembly = Assembly(key: key, write: write, progress: Progress(slice: slice, headers: headers, now: now))
        guard case .joined(let token) = assembly.join(range, headers: headers, now: now) else {
            assembly.drop()
            return nil
        }
        let dropped: [Assembly]? = assemblies.withLock { assemblies in
            // Another first part began one meanwhile: this one stores nothing.
            if assemblies[key] != nil { return nil }
            assemblies[key] = assembly
            guard assemblies.count > SliceAssemblies.maxWaiting,
                let oldest = assemblies.values.filter({ $0 !== assembly }).min(by: { $0.since < $1.since })
            else { return [] }
            assemblies[oldest.key] = nil
            return [oldest]
        }
        guard let dropped else {
            assembly.drop()
            return nil
        }
        for other in dropped { other.drop() }
        return Part(assemblies: self, assembly: assembly, token: token, position: range.first, end: range.last + 1)
    }

    /// Forgets `assembly`, once it ended, unless another already took its place.
    private func remove(_ assembly: Assembly) {
        assemblies.withLock { assemblies in
            if assemblies[assembly.key] === assembly { assemblies[assembly.key] = nil }
        }
    }

    /// Drops the assemblies no byte came to for longer than ``maxWait``.
    func expire(now: Double) {
        assemblies.withLock { assemblies in
            for (key, assembly) in assemblies where assembly.expire(now: now) { assemblies[key] = nil }
        }
    }

    /// How many assemblies are under way (tests).
    var count: Int { assemblies.withLock { $0.count } }
}

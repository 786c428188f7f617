import Glibc

/// Bytes waiting to be written to a socket: in-memory segments sent with one gathering write,
/// and file ranges sent with sendfile(2). Segments are references (a cached body is not
/// copied), so queuing a response is cheap.
public struct OutputQueue {
    enum Segment {
        case bytes([UInt8], offset: Int, end: Int)
        case file(OpenFile, offset: Int64, remaining: Int64)
    }

    private var segments: [Segment] = []
    private var head = 0
    /// Bytes queued and not yet written.
    public private(set) var pendingBytes = 0
    /// How many more heads before a large file body go out alone, their bodies held; see
    /// ``pausedLeads``.
    private var pausedLeadsLeft = OutputQueue.pausedLeads

    public init() {}

    public var isEmpty: Bool { head == segments.count }

    /// Queues `bytes` (no copy).
    @inline(__always)
    public mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        segments.append(.bytes(bytes, offset: 0, end: bytes.count))
        pendingBytes += bytes.count
    }

    /// Queues `bytes` from `offset` on (no copy).
    @inline(__always)
    public mutating func append(_ bytes: [UInt8], from offset: Int) {
        append(bytes, from: offset, count: bytes.count - offset)
    }

    /// Queues `count` bytes of `bytes` from `offset` (no copy).
    @inline(__always)
    public mutating func append(_ bytes: [UInt8], from offset: Int, count: Int) {
        guard count > 0 else { return }
        precondition(offset >= 0 && offset + count <= bytes.count)
        segments.append(.bytes(bytes, offset: offset, end: offset + count))
        pendingBytes += count
    }

    /// Queues the bytes `write` puts into `scratch` (at most `capacity`; it returns how many),
    /// without allocating for them: `scratch` is a buffer its owner keeps for small pieces
    /// (an event loop's, shared by its connections). While bytes queued from it wait for a
    /// slow socket, the next write goes to a copy (Array's copy-on-write), so queued bytes
    /// never change.
    public mutating func append(
        using scratch: inout [UInt8], capacity: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Int
    ) {
        if scratch.count < capacity { scratch = [UInt8](repeating: 0, count: max(capacity, 1024)) }
        let written = scratch.withUnsafeMutableBufferPointer { buffer in
            write(UnsafeMutableBufferPointer(rebasing: buffer[0..<capacity]))
        }
        append(scratch, from: 0, count: written)
    }

    /// Queues `count` bytes of `file` starting at `offset`.
    public mutating func appendFile(_ file: OpenFile, offset: Int64, count: Int64) {
        guard count > 0 else { return }
        segments.append(.file(file, offset: offset, remaining: count))
        pendingBytes += Int(count)
    }

    /// Drops everything queued.
    public mutating func removeAll() {
        segments.removeAll()
        head = 0
        pendingBytes = 0
    }

    /// The result of a flush.
    public enum FlushResult {
        /// Everything was written.
        case flushed
        /// The socket's buffer is full; wait for writability.
        case wouldBlock
        /// A response head went out alone and its body is held (``pausedLeads``): flush again
        /// after ``bodyPauseNanos``. The socket is still writable; waiting for writability
        /// would end the pause at once.
        case paused
    }

    /// The most one `sendfile` call is asked to send; the flush loop calls again until the
    /// socket is full. Measured, not derived: 10 MiB hits over 8 loopback connections went
    /// from 1,246-2,264 to 2,323-2,704 per 5 s with this cap (4 interleaved reps; 512 KiB
    /// in between, 128 KiB worse again; docs/PERFORMANCE.md, "Design choices"). The likely reason: a
    /// call holds the socket's lock while it runs, so the receiver's window updates are only
    /// processed between calls, and one call for the whole body sends into a stale window
    /// (TCP segments per response fell from ~450 to ~365).
    static let sendfileChunk: Int64 = 256 << 10

    /// How many of a new connection's responses with a large file body (``pausedLeadMinimum``)
    /// may send their head alone and hold the body for ``bodyPauseNanos``: those sent while the
    /// client's receive window is smaller than twice the response (``pausesBody(of:after:socket:)``).
    /// Otherwise head and body leave together (MSG_MORE): one segment train and one client read.
    ///
    /// Why, for a Linux client on loopback (docs/PERFORMANCE.md, "Design choices"): its receive
    /// buffer starts at 128 KiB and grows (`tcp_rcv_space_adjust`) by what its reader copied
    /// since the last measurement *less what still waits unread*, measured at most once per
    /// receive round trip — which it estimates at ~1 ms over loopback from millisecond
    /// timestamps, so the measurement lands on the first read of a response. When head and
    /// body arrive together that read finds the whole body unread and the buffer does not
    /// grow: a ~100 KiB response then does not fit the window (~95 KiB), its tail waits for a
    /// window update, and the client acknowledges each response one and a half times or more
    /// instead of once; on a saturated client that is CPU it does not spend on requests. A
    /// head read before its body arrives has nothing unread behind it, the whole previous
    /// response counts, and the buffer grows. Measured with wrk at 50 connections (pure ACKs per
    /// response over 5 s): heads together 1.30-1.79; eight heads paused for 200 µs 1.01-1.25;
    /// paused until the window holds two responses 1.00-1.03; nginx 1.01-1.03. The count only
    /// bounds what a client whose window never grows (a small fixed buffer) is made to wait.
    public static let pausedLeads = 32

    /// The smallest file body whose head goes alone (``pausedLeads``): a Linux client's initial
    /// receive window is ~64 KiB; a smaller response fits it and gains nothing from the pause.
    public static let pausedLeadMinimum: Int64 = 64 << 10

    /// How long a paused body waits after its head: long enough for a client busy with other
    /// connections to reach this one's head first (with eight paused heads, 50 µs and 100 µs
    /// left 1.15-1.26 ACKs per response in one of two runs each), short beside the transfer
    /// of a body this large on anything but loopback.
    public static let bodyPauseNanos: UInt64 = 200_000

    /// Writes as much as the socket takes.
    public mutating func flush(to socket: Socket) throws(SystemError) -> FlushResult {
        while head < segments.count {
            let written: Int?
            switch segments[head] {
            case .file(let file, let offset, let remaining):
                var position = offset
                written = try socket.sendfile(from: file.fd, offset: &position, count: Int(min(remaining, OutputQueue.sendfileChunk)))
                if let written, written == 0 {
                    // The file is shorter than promised (truncated underneath us): the response
                    // cannot be completed, so fail rather than spin.
                    throw SystemError(call: "sendfile", errno: EIO)
                }
            case .bytes:
                let (count, paused) = try writeGathered(to: socket)
                if paused, let count {
                    advance(by: count)
                    return .paused
                }
                written = count
            }
            guard let written else { return .wouldBlock }
            advance(by: written)
        }
        segments.removeAll(keepingCapacity: segments.count <= 16)
        head = 0
        return .flushed
    }

    private mutating func advance(by count: Int) {
        pendingBytes -= count
        var remaining = count
        while remaining > 0, head < segments.count {
            switch segments[head] {
            case .bytes(let bytes, let offset, let end):
                let left = end - offset
                if remaining >= left {
                    remaining -= left
                    segments[head] = .bytes([], offset: 0, end: 0)
                    head += 1
                } else {
                    segments[head] = .bytes(bytes, offset: offset + remaining, end: end)
                    remaining = 0
                }
            case .file(let file, let offset, let left):
                if Int64(remaining) >= left {
                    remaining -= Int(left)
                    head += 1
                } else {
                    segments[head] = .file(file, offset: offset + Int64(remaining), remaining: left - Int64(remaining))
                    remaining = 0
                }
            }
        }
        if head > 32 && head * 2 > segments.count {
            segments.removeFirst(head)
            head = 0
        }
    }

    /// One sendmsg over the run of in-memory segments at the head (at most 16), marked as
    /// followed by more when a file range comes next (a head before its sendfile body), except
    /// before a new connection's first large file bodies (``pausedLeads``): then the run goes
    /// alone, and once it has left whole (a short write sends the rest alone too) the body is
    /// paused. Returns the bytes written (nil if the call would block) and whether to pause.
    private mutating func writeGathered(to socket: Socket) throws(SystemError) -> (written: Int?, paused: Bool) {
        var end = head
        while end < segments.count, end - head < 16, case .bytes = segments[end] { end += 1 }
        var followedByFile = false
        var pausedRun: Int?  // the run's bytes, when its body is to be paused
        if end < segments.count, case .file(_, _, let remaining) = segments[end] {
            followedByFile = true
            pausedRun = pausesBody(of: remaining, after: head..<end, socket: socket)
        }
        let written = try withUnsafeTemporaryAllocation(of: iovec.self, capacity: 16) {
            (vectors) throws(SystemError) -> Int? in
            try gather(from: head, to: end, into: vectors, count: 0, more: followedByFile && pausedRun == nil, socket: socket)
        }
        guard let pausedRun, let written, written == pausedRun else { return (written, false) }
        pausedLeadsLeft -= 1
        return (written, true)
    }

    /// Whether a file body of `bodyBytes` after the in-memory run `run` (its head) waits
    /// (``pausedLeads``): the run's byte count if so, else nil. It does while pauses are left,
    /// the body is large, and the client's receive window is still too small for the response
    /// to be acknowledged once: a Linux receiver acknowledges again when reading has doubled
    /// the window left after its first ACK, which a window of more than twice the response
    /// never reaches (`tcp_cleanup_rbuf`); beyond 1 MiB the window counts as large whatever the
    /// response. Once it is large no later body waits; a kernel that does not report the
    /// window leaves the pause to the count alone.
    private mutating func pausesBody(of bodyBytes: Int64, after run: Range<Int>, socket: Socket) -> Int? {
        guard pausedLeadsLeft > 0, bodyBytes >= OutputQueue.pausedLeadMinimum else { return nil }
        let runBytes = byteCount(from: run.lowerBound, to: run.upperBound)
        guard let window = socket.peerReceiveWindow() else { return runBytes }
        if window >= min(2 * (runBytes + Int(bodyBytes)), OutputQueue.largeClientWindow) {
            pausedLeadsLeft = 0
            return nil
        }
        return runBytes
    }

    /// A client window that needs no pause for any response size (``pausesBody(of:after:socket:)``).
    static let largeClientWindow = 1 << 20

    /// Bytes queued in the in-memory segments `start..<end`.
    private func byteCount(from start: Int, to end: Int) -> Int {
        segments[start..<end].reduce(0) { total, segment in
            guard case .bytes(_, let offset, let segmentEnd) = segment else { return total }
            return total + segmentEnd - offset
        }
    }

    /// Pins each segment's storage with nested closures so the pointers stay valid for the call.
    private func gather(
        from index: Int, to end: Int, into vectors: UnsafeMutableBufferPointer<iovec>, count: Int, more: Bool,
        socket: Socket
    ) throws(SystemError) -> Int? {
        if index == end {
            return try socket.writev(UnsafeBufferPointer(rebasing: vectors[0..<count]), more: more)
        }
        guard case .bytes(let bytes, let offset, let segmentEnd) = segments[index] else {
            return try gather(from: end, to: end, into: vectors, count: count, more: more, socket: socket)
        }
        let result = bytes.withUnsafeBytes { raw in
            vectors[count] = iovec(
                iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + offset), iov_len: segmentEnd - offset)
            return Result { () throws(SystemError) -> Int? in
                try gather(from: index + 1, to: end, into: vectors, count: count + 1, more: more, socket: socket)
            }
        }
        return try result.get()
    }
}

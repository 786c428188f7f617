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
    }

    /// The most one `sendfile` call is asked to send; the flush loop calls again until the
    /// socket is full. A call holds the socket's lock while it runs, so the receiver's window
    /// updates are processed only between calls: one call for a whole large body sends into a
    /// stale window (docs/PERFORMANCE.md, "Design choices").
    static let sendfileChunk: Int64 = 256 << 10

    /// Writes as much as the transport takes.
    public mutating func flush(to transport: some Transport) throws(SystemError) -> FlushResult {
        while head < segments.count {
            let written: Int?
            switch segments[head] {
            case .file(let file, let offset, let remaining):
                let count = Int(min(remaining, OutputQueue.sendfileChunk))
                if transport.canSendFile {
                    var position = offset
                    written = try transport.sendFile(from: file.fd, offset: &position, count: count)
                } else {
                    let chunk = file.mapped == nil ? OutputQueue.copyChunk : OutputQueue.writeChunk
                    written = try copy(file, offset: offset, count: Int(min(remaining, Int64(chunk))), to: transport)
                }
                if let written, written == 0 {
                    // The file is shorter than promised (truncated underneath us): the response
                    // cannot be completed, so fail rather than spin.
                    // No call failed on a mapping: the mapping itself ended.
                    throw SystemError(call: transport.canSendFile ? "sendfile" : file.mapped == nil ? "pread" : "mapped file", errno: EIO)
                }
            case .bytes:
                written = try writeGathered(to: transport)
            }
            guard let written else { return .wouldBlock }
            advance(by: written)
        }
        segments.removeAll(keepingCapacity: segments.count <= 16)
        head = 0
        return .flushed
    }

    /// The most a transport without `sendfile` gets of a file per write (a TLS record is at most
    /// 16 KiB; a few records per write keep the calls few).
    static let copyChunk = 64 << 10

    /// Reads `count` bytes of `file` at `offset` and writes them (a transport that must see
    /// the bytes): returns what the transport took; the rest is read again next time. A
    /// mapped memory file's bytes are written from its mapping, up to ``writeChunk`` a call as
    /// an array's are, with no read into a buffer.
    private func copy(_ file: OpenFile, offset: Int64, count: Int, to transport: some Transport) throws(SystemError) -> Int? {
        if let mapped = file.mapped {
            let start = Int(offset)
            guard start < mapped.count else { return 0 }
            return try write(mapped.baseAddress! + start, count: min(count, mapped.count - start), to: transport)
        }
        return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 16) { (buffer) throws(SystemError) -> Int? in
            let got = try Syscall.call("pread") { pread(file.fd, buffer.baseAddress, buffer.count, off_t(offset)) }
            guard got > 0 else { return 0 }
            return try write(UnsafeRawPointer(buffer.baseAddress!), count: got, to: transport)
        }
    }

    /// One write of `count` bytes at `bytes`: what the transport took (nil if it would block).
    private func write(_ bytes: UnsafeRawPointer, count: Int, to transport: some Transport) throws(SystemError) -> Int? {
        var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes), iov_len: count)
        return try withUnsafePointer(to: &vector) { (pointer) throws(SystemError) -> Int? in
            try transport.write(UnsafeBufferPointer(start: pointer, count: 1), more: false)
        }
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
    /// followed by more when a file range comes next (a head before its sendfile body: head and
    /// body leave as one segment train). Returns the bytes written (nil if the call would block).
    private func writeGathered(to transport: some Transport) throws(SystemError) -> Int? {
        var end = head
        while end < segments.count, end - head < 16, case .bytes = segments[end] { end += 1 }
        var followedByFile = false
        if end < segments.count, case .file = segments[end] { followedByFile = true }
        return try withUnsafeTemporaryAllocation(of: iovec.self, capacity: 16) {
            (vectors) throws(SystemError) -> Int? in
            try gather(
                from: head, to: end, into: vectors, count: 0, budget: OutputQueue.writeChunk, more: followedByFile,
                transport: transport)
        }
    }

    /// The most one gathering write is asked to send, for the reason of ``sendfileChunk``: a
    /// large in-memory body goes out in calls of this size, each taking the window as the
    /// receiver's acknowledgements left it.
    static let writeChunk = 4 << 20

    /// Pins each segment's storage with nested closures so the pointers stay valid for the call.
    /// `budget`: the bytes this call may still take (``writeChunk``); what is past it is left
    /// for the next call.
    private func gather(
        from index: Int, to end: Int, into vectors: UnsafeMutableBufferPointer<iovec>, count: Int, budget: Int,
        more: Bool, transport: some Transport
    ) throws(SystemError) -> Int? {
        if index == end || budget == 0 {
            return try transport.write(UnsafeBufferPointer(rebasing: vectors[0..<count]), more: more)
        }
        guard case .bytes(let bytes, let offset, let segmentEnd) = segments[index] else {
            return try gather(from: end, to: end, into: vectors, count: count, budget: budget, more: more, transport: transport)
        }
        let length = min(segmentEnd - offset, budget)
        let result = bytes.withUnsafeBytes { raw in
            vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + offset), iov_len: length)
            return Result { () throws(SystemError) -> Int? in
                try gather(
                    from: index + 1, to: end, into: vectors, count: count + 1, budget: budget - length, more: more,
                    transport: transport)
            }
        }
        return try result.get()
    }
}

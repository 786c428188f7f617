import Glibc
import LarderConfig
import LarderHTTP
import LarderIO

/// One line per request, buffered per event loop and written in batches (at most every 200 ms,
/// or sooner when 32 KiB are waiting), so logging costs no system call per request.
///
/// State: loop-confined.
final class AccessLog {
    var buffer: [UInt8] = []
    private let fd: Int32
    var enabled: Bool
    var format = LogConfig.AccessFormat.larder
    /// `log.redact_query` (an empty list redacts nothing, at no cost).
    var redaction = QueryRedaction(names: [])
    private var flushScheduled = false
    private let loop: EventLoop
    private var stampSecond = -1
    private var stampPrefix: [UInt8] = []
    /// The last client address written and its text (a local proxy's clients are mostly one).
    private var lastClient: [UInt8] = []
    private var lastClientText: [UInt8] = []
    private static let noClient = Array("-".utf8)

    /// Under journald each line starts with `<6>` (info), which journald turns into the priority.
    private let journal = Systemd.underJournal
    /// How the flush timer reaches the log: a weak reference would slow every retain of it, one
    /// a request (``LoopWeak``).
    private lazy var weakSelf = LoopWeak(self)
    /// Where ``appendLine(bound:_:)`` writes; grown to the longest bound asked for.
    private var scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 1024)

    init(loop: EventLoop, fd: Int32 = 1, enabled: Bool) {
        self.loop = loop
        self.fd = fd
        self.enabled = enabled
        buffer.reserveCapacity(32 * 1024)
    }

    deinit {
        weakSelf.clear()
        scratch.deallocate()
    }

    /// Appends one line, in `format`.
    func record(
        client: SocketAddress?, method: String, url: Target, status: Int, outcome: Outcome,
        bytes: Int, durationNanos: UInt64, attempts: Int, retries: String? = nil, tls: String? = nil, key: String? = nil,
        user: String? = nil, agent: String? = nil, detail: FailureCause? = nil
    ) {
        guard enabled else { return }
        if journal { buffer.append(contentsOf: "<6>".utf8) }
        // Only the default format writes an absolute target from its parts; the others read its
        // text, some more than once (Squid's target and hierarchy fields).
        var target = format == .larder ? url : .text(url.text)
        var key = key
        if !redaction.names.isEmpty {
            // A target without `?` costs a scan for it; one with a covered parameter a copy.
            let query: Bool
            switch target {
            case .absolute(let absolute): query = absolute.pathAndQuery.utf8.contains(UInt8(ascii: "?"))
            case .text(let text): query = text.utf8.contains(UInt8(ascii: "?"))
            }
            if query, let hidden = redaction.redacted(target.text) { target = .text(hidden) }
            if let text = key, let hidden = redaction.redacted(text) { key = hidden }
        }
        let entry = Entry(
            client: client, method: method, target: target, status: status, outcome: outcome,
            bytes: bytes, durationNanos: durationNanos,
            attempts: attempts, retries: retries, tls: tls, key: key, user: user, agent: agent, detail: detail)
        switch format {
        case .larder: appendLarder(entry)
        case .squid: appendSquid(entry)
        case .combined: appendCombined(entry)
        case .json: appendJSON(entry)
        }
        buffer.append(10)
        if buffer.count >= 32 * 1024 {
            flush()
        } else if !flushScheduled {
            flushScheduled = true
            loop.schedule(afterNanos: 200_000_000) { [weakSelf] in
                guard let log = weakSelf.object else { return }
                log.flushScheduled = false
                log.flush()
            }
        }
    }

    /// Writes what is buffered.
    func flush() {
        guard !buffer.isEmpty else { return }
        var offset = 0
        buffer.withUnsafeBytes { raw in
            while offset < raw.count {
                guard let written = try? Syscall.call("write", { Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }),
                    written > 0
                else { return }
                offset += written
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// The most ``writeTimestamp(to:)`` writes: `2026-11-27T09:14:03.123Z` is 24 bytes, with
    /// room for a clock set past the year 9999.
    static let timestampBound = 32

    func appendTimestamp() {
        appendLine(bound: AccessLog.timestampBound) { writeTimestamp(to: &$0) }
    }

    /// The wall-clock time in UTC to the millisecond; the text up to the second is made once a
    /// second.
    func writeTimestamp(to writer: inout ByteWriter) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let second = Int(ts.tv_sec)
        if second != stampSecond {
            stampSecond = second
            var time = time_t(second)
            var parts = tm()
            gmtime_r(&time, &parts)
            func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
            stampPrefix = Array(
                "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
                    .utf8)
        }
        stampPrefix.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
        writer.append(Int(ts.tv_nsec / 1_000_000), zeroPaddedTo: 3)
        writer.append(UInt8(ascii: "Z"))
    }

    /// The client's address as text (`-` without one), remembered for the next line from the
    /// same address, so a keep-alive client's address is formatted once.
    func clientText(_ client: SocketAddress?) -> [UInt8] {
        guard let client else { return AccessLog.noClient }
        if client.ipBytes != lastClient {
            lastClient = client.ipBytes
            lastClientText = Array(client.ipString.utf8)
        }
        return lastClientText
    }

    /// Appends what `write` puts down, at most `bound` bytes (more is a bug: the writer does
    /// not check in release builds). The line is written into ``scratch`` and copied in once,
    /// which is cheaper than appending to the array byte by byte or filling `bound` bytes of it
    /// to write in place and trimming them.
    func appendLine(bound: Int, _ write: (inout ByteWriter) -> Void) {
        if scratch.count < bound {
            scratch.deallocate()
            scratch = .allocate(capacity: bound)
        }
        var writer = ByteWriter(UnsafeMutableBufferPointer(rebasing: scratch[..<bound]))
        write(&writer)
        precondition(writer.count <= bound, "access line longer than its bound")
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<writer.count]))
    }

    /// ` name="value"`, with quotes and control characters replaced so a value cannot end the
    /// field or the line (``writeEscaped(_:wire:to:)``). `wire`: a header's value.
    func appendQuoted(_ name: StaticString, _ value: String, wire: Bool = false) {
        appendLine(bound: name.utf8CodeUnitCount + 2 + AccessLog.escapedBound(value)) {
            AccessLog.writeQuoted(name, value, wire: wire, to: &$0)
        }
    }

    /// ``appendQuoted(_:_:wire:)`` through a writer: the name, then at most two bytes more than
    /// ``escapedBound(_:)``.
    static func writeQuoted(_ name: StaticString, _ value: String, wire: Bool = false, to writer: inout ByteWriter) {
        writer.append(name)
        writer.append(UInt8(ascii: "\""))
        writeEscaped(value, wire: wire, to: &writer)
        writer.append(UInt8(ascii: "\""))
    }

    func appendDecimal(_ value: Int) {
        HeadSerializer.appendDecimal(value, to: &buffer)
    }
}

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
    private var flushScheduled = false
    private let loop: EventLoop
    private var stampSecond = -1
    private var stampPrefix: [UInt8] = []

    /// Under journald each line starts with `<6>` (info), which journald turns into the priority.
    private let journal = Systemd.underJournal

    init(loop: EventLoop, fd: Int32 = 1, enabled: Bool) {
        self.loop = loop
        self.fd = fd
        self.enabled = enabled
        buffer.reserveCapacity(32 * 1024)
    }

    /// Appends one line, in `format`.
    func record(
        client: SocketAddress?, method: String, url: String, status: Int, outcome: String,
        bytes: Int, durationNanos: UInt64, attempts: Int, retries: String? = nil, tls: String? = nil, key: String? = nil,
        user: String? = nil, agent: String? = nil
    ) {
        guard enabled else { return }
        if journal { buffer.append(contentsOf: "<6>".utf8) }
        let entry = Entry(
            client: client, method: method, url: url, status: status, outcome: outcome, bytes: bytes, durationNanos: durationNanos,
            attempts: attempts, retries: retries, tls: tls, key: key, user: user, agent: agent)
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
            loop.schedule(afterNanos: 200_000_000) { [weak self] in
                self?.flushScheduled = false
                self?.flush()
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

    func appendTimestamp() {
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
        buffer.append(contentsOf: stampPrefix)
        let millis = Int(ts.tv_nsec / 1_000_000)
        buffer.append(UInt8(48 + millis / 100))
        buffer.append(UInt8(48 + (millis / 10) % 10))
        buffer.append(UInt8(48 + millis % 10))
        buffer.append(UInt8(ascii: "Z"))
    }

    /// ` name="value"`, with quotes and control bytes replaced so a value cannot end the field
    /// or the line.
    func appendQuoted(_ name: StaticString, _ value: String) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        buffer.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            buffer.append(
                byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte == 0x7F ? UInt8(ascii: "'") : byte)
        }
        buffer.append(UInt8(ascii: "\""))
    }

    func appendDecimal(_ value: Int) {
        HeadSerializer.appendDecimal(value, to: &buffer)
    }
}

import Glibc
import LarderHTTP
import LarderIO

/// One line per request, buffered per event loop and written in batches (at most every 200 ms,
/// or sooner when 32 KiB are waiting), so logging costs no system call per request.
///
/// State: loop-confined.
final class AccessLog {
    private var buffer: [UInt8] = []
    private let fd: Int32
    var enabled: Bool
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

    /// Appends one line.
    func record(
        client: SocketAddress?, method: String, url: String, status: Int, outcome: String,
        bytes: Int, durationNanos: UInt64, attempts: Int, retries: String? = nil, tls: String? = nil, key: String? = nil,
        user: String? = nil, agent: String? = nil
    ) {
        guard enabled else { return }
        if journal { buffer.append(contentsOf: "<6>".utf8) }
        appendTimestamp()
        buffer.append(32)
        if let client { buffer.append(contentsOf: client.ipString.utf8) } else { buffer.append(45) }
        buffer.append(contentsOf: " \"".utf8)
        buffer.append(contentsOf: method.utf8)
        buffer.append(32)
        for byte in url.utf8 { buffer.append(byte == UInt8(ascii: "\"") ? UInt8(ascii: "'") : byte) }
        buffer.append(contentsOf: "\" ".utf8)
        appendDecimal(status)
        buffer.append(32)
        buffer.append(contentsOf: outcome.utf8)
        buffer.append(32)
        appendDecimal(bytes)
        buffer.append(32)
        let micros = Int(durationNanos / 1000)
        appendDecimal(micros / 1000)
        buffer.append(46)
        let fraction = micros % 1000
        if fraction < 100 { buffer.append(48) }
        if fraction < 10 { buffer.append(48) }
        appendDecimal(fraction)
        buffer.append(contentsOf: "ms attempts=".utf8)
        appendDecimal(attempts)
        if let retries {
            buffer.append(contentsOf: " retries=".utf8)
            buffer.append(contentsOf: retries.utf8)
        }
        // A request that came inside an intercepted TLS session: its protocol version.
        if let tls {
            buffer.append(contentsOf: " tls=".utf8)
            buffer.append(contentsOf: tls.utf8)
        }
        // The key a route built otherwise than from the URL (quoted: it is the operator's text).
        if let key {
            appendQuoted(" key=", key)
        }
        // The proxy user (proxy.auth_users) and the client's User-Agent, quoted: client text.
        if let user { appendQuoted(" user=", user) }
        if let agent { appendQuoted(" ua=", agent) }
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

    private func appendTimestamp() {
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
    private func appendQuoted(_ name: StaticString, _ value: String) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        buffer.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            buffer.append(
                byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte == 0x7F ? UInt8(ascii: "'") : byte)
        }
        buffer.append(UInt8(ascii: "\""))
    }

    private func appendDecimal(_ value: Int) {
        HeadSerializer.appendDecimal(value, to: &buffer)
    }
}

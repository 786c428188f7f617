import Glibc
import LarderIO

/// The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
/// `process_max_fds`, `process_start_time_seconds`), read from /proc/self at scrape time, so
/// dashboards built for other daemons work unchanged.
struct ProcessMetrics: Equatable {
    var cpuSeconds: Double
    var residentBytes: Int
    var virtualBytes: Int
    var openFiles: Int
    var maxFiles: Int?
    var startTime: Double

    /// This process now; nil where /proc is not mounted.
    static func current() -> ProcessMetrics? {
        guard let stat = try? FileSystem.readWhole("/proc/self/stat", limit: 4096), let bootTime = systemBootTime,
            let fds = try? FileSystem.list("/proc/self/fd")
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = sysconf(Int32(_SC_PAGESIZE))
        return parse(
            stat: String(decoding: stat, as: UTF8.self), ticksPerSecond: ticks, pageSize: page, bootTime: bootTime,
            openFiles: fds.count, maxFiles: ResourceLimits.openFiles())
    }

    /// Reads proc(5)'s /proc/PID/stat line: fields after the command name's closing
    /// parenthesis (the name may hold spaces and parentheses), numbered as the manual does.
    static func parse(stat: String, ticksPerSecond: Double, pageSize: Int, bootTime: Double, openFiles: Int, maxFiles: Int?)
        -> ProcessMetrics?
    {
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        // Field 3 (state) is the first after the name.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Double? { number - 3 < fields.count ? Double(fields[number - 3]) : nil }
        guard let user = field(14), let system = field(15), let start = field(22), let virtual = field(23), let resident = field(24)
        else { return nil }
        return ProcessMetrics(
            cpuSeconds: (user + system) / ticksPerSecond, residentBytes: Int(resident) * pageSize, virtualBytes: Int(virtual),
            openFiles: openFiles, maxFiles: maxFiles, startTime: bootTime + start / ticksPerSecond)
    }

    /// Read once: /proc/stat is one line per CPU and interrupt, and the boot time never changes.
    static let systemBootTime: Double? = (try? FileSystem.readWhole("/proc/stat", limit: 1 << 20)).flatMap {
        bootTime(String(decoding: $0, as: UTF8.self))
    }

    /// `btime` of /proc/stat: the boot time, in seconds since the epoch.
    static func bootTime(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return line.dropFirst(6).split(separator: " ").first.flatMap { Double($0) }
        }
        return nil
    }

    /// The series in the text exposition format.
    func render(into text: inout [UInt8]) {
        func series(_ name: String, _ type: String, _ help: String, _ value: String) {
            text.append(contentsOf: "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n".utf8)
        }
        series("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", "\(cpuSeconds)")
        series("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", "\(residentBytes)")
        series("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", "\(virtualBytes)")
        series("process_open_fds", "gauge", "Number of open file descriptors.", "\(openFiles)")
        if let maxFiles { series("process_max_fds", "gauge", "Maximum number of open file descriptors.", "\(maxFiles)") }
        series("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", "\(startTime)")
    }
}

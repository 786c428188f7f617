import CLarderSystem
import Glibc

/// How many CPUs this process can keep busy at once: the CPUs it may run on
/// (sched_getaffinity), capped by the CPU quota of its cgroup and every ancestor (cgroup v2
/// `cpu.max`, v1 `cpu.cfs_quota_us`), rounded up. A container limited to 1.5 CPUs on a
/// 64-core host gets 2, not 64: more loops than that would only take turns on the quota.
public enum CPUBudget {
    /// The budget of the running process, at least 1.
    public static func current() -> Int {
        let affinity = Int(larder_available_cpus())
        let cgroups = (try? readText("/proc/self/cgroup")) ?? ""
        var quotas: [Double] = []
        for directory in quotaFiles(procSelfCgroup: cgroups) {
            guard let text = try? readText(directory.path) else { continue }
            if let quota = directory.isV2 ? quota(cpuMax: text) : quota(cfsQuota: text, period: (try? readText(directory.periodPath)) ?? "")
            {
                quotas.append(quota)
            }
        }
        return budget(affinity: affinity, quotas: quotas)
    }

    /// The smaller of the CPU count and the tightest quota, rounded up; at least 1.
    public static func budget(affinity: Int, quotas: [Double]) -> Int {
        var result = max(affinity, 1)
        if let tightest = quotas.min(), tightest > 0 {
            result = min(result, Int(tightest.rounded(.up)))
        }
        return max(result, 1)
    }

    /// CPUs allowed by a cgroup v2 `cpu.max` ("150000 100000" is 1.5; "max 100000" is none).
    public static func quota(cpuMax text: String) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]), period > 0, quota > 0 else {
            return nil
        }
        return quota / period
    }

    /// CPUs allowed by cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` (-1: none).
    public static func quota(cfsQuota: String, period: String) -> Double? {
        let trim: (String) -> Substring = { $0.split(whereSeparator: { $0 == "\n" || $0 == " " }).first ?? "" }
        guard let quota = Double(trim(cfsQuota)), let period = Double(trim(period)), quota > 0, period > 0 else { return nil }
        return quota / period
    }

    /// A quota file to read: the process's cgroup and each ancestor up to the root.
    public struct QuotaFile: Equatable, Sendable {
        public var path: String
        public var periodPath: String
        public var isV2: Bool
    }

    /// The quota files for the cgroups named in `/proc/self/cgroup`: v2 (`0::/path`) under
    /// /sys/fs/cgroup, v1 (`N:cpu,cpuacct:/path`) under /sys/fs/cgroup/cpu,cpuacct. A quota
    /// set on a parent limits its children too, so every level counts.
    public static func quotaFiles(procSelfCgroup text: String, root: String = "/sys/fs/cgroup") -> [QuotaFile] {
        var files: [QuotaFile] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[2].hasPrefix("/") else { continue }
            let controllers = fields[1].split(separator: ",")
            let isV2 = fields[0] == "0" && fields[1].isEmpty
            guard isV2 || controllers.contains("cpu") else { continue }
            let base = isV2 ? root : root + "/" + fields[1]
            var components = fields[2].split(separator: "/").map(String.init)
            while true {
                let directory = ([base] + components).joined(separator: "/")
                files.append(
                    isV2
                        ? QuotaFile(path: directory + "/cpu.max", periodPath: "", isV2: true)
                        : QuotaFile(path: directory + "/cpu.cfs_quota_us", periodPath: directory + "/cpu.cfs_period_us", isV2: false))
                if components.isEmpty { break }
                components.removeLast()
            }
        }
        return files
    }

    /// A small file from /proc or /sys, whole (they are a few bytes to a few KiB).
    static func readText(_ path: String) throws(SystemError) -> String {
        String(decoding: try FileSystem.readWhole(path, limit: 64 << 10), as: UTF8.self)
    }
}

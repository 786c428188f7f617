import Glibc

/// Process resource limits.
public enum ResourceLimits {
    /// The soft limit on open descriptors now in force (nil if it cannot be read).
    public static func openFiles() -> Int? {
        var limit = rlimit()
        guard (try? Syscall.call("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }) != nil else {
            return nil
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// Raises the soft limit on open descriptors to the hard limit (a daemon holding thousands
    /// of connections needs more than the usual soft 1024). Returns the limit now in force.
    @discardableResult
    public static func raiseOpenFiles() -> Int {
        var limit = rlimit()
        guard (try? Syscall.call("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }) != nil else {
            return 1024
        }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if (try? Syscall.call("setrlimit") { setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) }) != nil {
                limit = raised
            }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY (all ones) clamps to Int.max
    }
}

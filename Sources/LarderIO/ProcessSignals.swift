import CLarderSystem
import Glibc

/// The daemon's signal dispositions. `handled` signals are blocked in every thread and taken
/// synchronously by one thread with sigwait; every other signal whose default action ends the
/// process, and that is not a fault or a deliberate kill (SEGV, ABRT, KILL, QUIT, ...), is
/// ignored, so a stray `kill -USR2` or `-ALRM` from a script written for another daemon does
/// not take the proxy down.
public enum ProcessSignals {
    /// Signals that terminate by default and mean nothing to Larder: ignored.
    static var stray: [Int32] {
        [SIGPIPE, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT, SIGXFSZ]
            + Array(larder_sigrtmin()...larder_sigrtmax())
    }

    /// Blocks `handled` (call before any other thread starts, so all inherit the mask), ignores
    /// the stray ones, and returns the set to pass to ``wait(_:)``.
    public static func install(handled: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // SIGXFSZ ignored: a write past RLIMIT_FSIZE then fails with EFBIG, which the disk tier
        // reports, instead of killing the process.
        for signal in stray where !handled.contains(signal) { Glibc.signal(signal, SIG_IGN) }
        return set
    }

    /// Waits for one of the signals in `set`.
    public static func wait(_ set: sigset_t) -> Int32 {
        var set = set
        var received: Int32 = 0
        sigwait(&set, &received)
        return received
    }
}

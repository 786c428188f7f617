import CSystemd
import Glibc
import LarderIO

/// Larder's only contact with libsystemd: service-manager notifications (sd_notify), the
/// watchdog interval, and sockets passed by socket activation. Everything is a no-op outside
/// systemd (no NOTIFY_SOCKET, no LISTEN_FDS), as sd-daemon itself is.
public enum Systemd {
    /// Sends a notification (`READY=1`, `STATUS=…`, `RELOADING=1`, `STOPPING=1`, `WATCHDOG=1`).
    public static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// Whether a service manager listens for notifications.
    public static var isSupervised: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// `RELOADING=1` with the monotonic timestamp systemd uses to order it (Type=notify-reload).
    public static func notifyReloading() {
        notify("RELOADING=1\nMONOTONIC_USEC=\(Clocks.monotonicNanos() / 1000)")
    }

    /// The watchdog interval in nanoseconds when `WatchdogSec=` is set for this process.
    public static func watchdogInterval() -> UInt64? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return microseconds * 1000
    }

    /// A socket passed by the service manager, with its `FileDescriptorName=`.
    public struct PassedSocket: Sendable {
        public let fd: Int32
        public let name: String
    }

    /// Sockets passed with LISTEN_FDS/LISTEN_FDNAMES (unset afterwards, so children do not
    /// inherit them). Empty when not socket-activated.
    public static func listenSockets() -> [PassedSocket] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return [] }
        var sockets: [PassedSocket] = []
        for index in 0..<Int(count) {
            var name = "unknown"
            if let names, let entry = names[index] {
                name = String(cString: entry)
                free(entry)
            }
            sockets.append(PassedSocket(fd: SD_LISTEN_FDS_START + Int32(index), name: name))
        }
        free(names)
        return sockets
    }

    /// Whether stdout/stderr go to the journal (then log lines carry `<N>` priority prefixes).
    public static var underJournal: Bool { getenv("JOURNAL_STREAM") != nil }
}

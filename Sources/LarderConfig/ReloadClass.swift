/// When a change to a configuration key takes effect.
public enum ReloadClass: String, Sendable {
    /// A reload (SIGHUP) applies it to what starts after the reload.
    case live
    /// Read once at start (sockets, threads, the cache directory, the log file): a reload
    /// that changes it says so and keeps the running value.
    case restart
}

/// The disk cache directory `serve` is given on its command line (`--cache-dir`), which wins
/// over `disk.path`. `check-config` reports it in place of `disk.path`, so that a shell sees the
/// directory the service really uses: the packaged unit serves with `--cache-dir
/// ${CACHE_DIRECTORY}` (systemd's `CacheDirectory=larder`), whatever the file says.
public enum ServedCacheDirectory {
    /// The packaged service's cache directory (`CacheDirectory=larder`).
    public static let system = "/var/cache/larder"

    /// The directory and why: `flag` (`check-config --cache-dir`); `$CACHE_DIRECTORY`, which
    /// systemd sets for the unit; the packaged unit's directory when the state directory is the
    /// packaged unit's; nil when `serve` would be given none and `disk.path` holds.
    public static func choose(
        flag: String?, environment: [String: String], stateDirectory: StateDirectory, workingDirectory: String
    ) -> (path: String, reason: String)? {
        if let flag, !flag.isEmpty {
            return (StateDirectory.absolute(flag, against: workingDirectory), "--cache-dir")
        }
        // Whole: the unit hands serve ${CACHE_DIRECTORY} as it is (one directory for the packaged
        // unit's CacheDirectory=larder).
        if let variable = environment["CACHE_DIRECTORY"], variable.hasPrefix("/") {
            return (StateDirectory.absolute(variable, against: "/"), "$CACHE_DIRECTORY, the packaged unit's serve --cache-dir")
        }
        if stateDirectory.path == StateDirectory.system {
            return (system, "the packaged unit's serve --cache-dir ${CACHE_DIRECTORY}")
        }
        return nil
    }
}

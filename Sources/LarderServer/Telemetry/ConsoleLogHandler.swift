import Glibc
import Logging

/// Writes log records as single lines to stderr: `larder: <level>: message key=value ...`.
/// Under journald (JOURNAL_STREAM set) each line starts with a `<N>` syslog priority instead,
/// which journald turns into the record's priority.
public struct ConsoleLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    /// The shared threshold: setting it (a reload's `log.level`) changes every logger's.
    public var logLevel: Logger.Level {
        get { threshold.level }
        nonmutating set { threshold.level = newValue }
    }
    private let threshold: LogThreshold
    private let journald: Bool

    public init(threshold: LogThreshold) {
        self.threshold = threshold
        journald = getenv("JOURNAL_STREAM") != nil
    }

    public init(level: Logger.Level) {
        self.init(threshold: LogThreshold(level))
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = journald ? "<\(ConsoleLogHandler.priority(event.level))>" : "larder: \(event.level): "
        line += event.message.description
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(value)"
        }
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

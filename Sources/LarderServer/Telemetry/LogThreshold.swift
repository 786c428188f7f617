import Logging
import Synchronization

/// The level below which daemon messages are dropped, shared by every ``ConsoleLogHandler``
/// so that a reload's `log.level` applies to loggers already handed out.
///
/// State: one atomic, read (relaxed) by each log call that reaches the handler.
public final class LogThreshold: Sendable {
    private let raw: Atomic<Int>

    public init(_ level: Logger.Level) {
        raw = Atomic(LogThreshold.levels.firstIndex(of: level) ?? 2)
    }

    private static let levels = Logger.Level.allCases

    /// The level now in force.
    public var level: Logger.Level {
        get { LogThreshold.levels[raw.load(ordering: .relaxed)] }
        set { raw.store(LogThreshold.levels.firstIndex(of: newValue) ?? 2, ordering: .relaxed) }
    }
}

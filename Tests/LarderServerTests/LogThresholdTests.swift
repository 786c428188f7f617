import Logging
import Testing

@testable import LarderServer

/// A reload's log.level reaches loggers already handed out: they share one threshold.
@Suite struct LogThresholdTests {
    @Test func everyHandlerOfOneThresholdFollowsItsLevel() {
        let threshold = LogThreshold(.info)
        let first = Logger(label: "a") { _ in ConsoleLogHandler(threshold: threshold) }
        let second = Logger(label: "b") { _ in ConsoleLogHandler(threshold: threshold) }
        #expect(first.logLevel == .info && second.logLevel == .info)
        threshold.level = .debug
        #expect(first.logLevel == .debug && second.logLevel == .debug)
        threshold.level = .critical
        #expect(second.logLevel == .critical)
        #expect(ConsoleLogHandler(level: .warning).logLevel == .warning, "a handler of its own keeps its level")
    }
}

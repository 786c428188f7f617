import Logging

/// The process's composition root: builds each service once, from the configuration at start,
/// and stops their threads at the end. ``Server`` keeps it; each ``ProxyLoop`` takes from it
/// the services its parts use, and hands those on (docs/ARCHITECTURE.md, "Services").
///
/// State: immutable references to services that are each thread-safe on their own.
final class SharedState: Sendable {
    let process: ProcessState
    let storage: Storage
    let telemetry: Telemetry
    let forwarding: Forwarding
    let tunnelling: Tunnelling

    init(runtime: RuntimeConfig, logger: Logger) {
        let config = runtime.config
        process = ProcessState(runtime: runtime, logger: logger)
        storage = Storage(config: config, logger: logger)
        telemetry = Telemetry(accessLogPath: config.log.accessFile)
        forwarding = Forwarding(retryRatio: config.retry.budgetRatio, retryFloor: config.retry.budgetMin, logger: logger)
        tunnelling = Tunnelling()
    }

    /// Ends the helper threads (after the loops stopped).
    func stopHelpers() {
        process.authenticator.stop()
        tunnelling.stop()
        storage.walker.stop()
    }
}

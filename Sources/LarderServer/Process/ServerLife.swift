/// Where the daemon is in its life. ``Server`` keeps one and moves it only through
/// ``after(_:)``; each loop keeps its own copy (``ProxyLoop/life``) so the request path reads
/// it without a lock.
///
/// `starting` binds and starts the loops; `running` serves and reloads; `draining` has stopped
/// accepting and lets exchanges in flight finish until the deadline; `stopped` is final.
public enum ServerLife: Equatable, Sendable {
    case starting
    case running
    /// Listeners closed; `deadline` (monotonic nanoseconds) is when the rest is closed.
    case draining(deadline: UInt64)
    case stopped

    /// What moves the daemon from one stage to the next.
    public enum Event: Equatable, Sendable {
        /// Every loop accepts on the listeners.
        case started
        /// Binding or starting a loop failed.
        case startFailed
        /// SIGTERM/SIGINT at `now` (monotonic nanoseconds), with `proxy.drain_timeout`.
        case drainRequested(now: UInt64, timeout: UInt64)
        /// The loops closed their connections and stopped.
        case loopsStopped
    }

    /// The stage after `event`, or nil when `event` cannot happen in this stage.
    public func after(_ event: Event) -> ServerLife? {
        switch (self, event) {
        case (.starting, .started): .running
        case (.starting, .startFailed): .stopped
        case (.running, .drainRequested(let now, let timeout)): .draining(deadline: now &+ timeout)
        case (.draining, .loopsStopped): .stopped
        default: nil
        }
    }

    /// Whether a reload may be applied: only while serving.
    public var acceptsReload: Bool { self == .running }

    /// Whether the drain deadline has passed at `now`: the remaining connections are closed.
    public func drainExpired(now: UInt64) -> Bool {
        if case .draining(let deadline) = self { return now >= deadline }
        return false
    }
}

/// Readiness reported by the event loop for one descriptor.
public struct IOEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let readable = IOEvents(rawValue: 1)
    public static let writable = IOEvents(rawValue: 2)
    /// The peer closed, or the descriptor failed (EPOLLHUP/EPOLLERR/EPOLLRDHUP).
    public static let hangup = IOEvents(rawValue: 4)
}

/// An object that owns a descriptor registered with an ``EventLoop`` and reacts to readiness.
/// Handlers live on their loop's thread only.
public protocol IOHandler: AnyObject {
    /// Called on the loop thread when the descriptor is ready.
    func handleIO(_ events: IOEvents)
}

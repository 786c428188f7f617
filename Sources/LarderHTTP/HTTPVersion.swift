/// An HTTP/1.x protocol version.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public let major: Int
    public let minor: Int

    @inlinable
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    // The protocol's own names (HTTP/1.0, HTTP/1.1) read better than camel case here. Values
    // made where they are used, not stored globals: a global is reached through its once-guarded
    // accessor on every comparison (each response head makes one).
    // swift-format-ignore: AlwaysUseLowerCamelCase
    @inlinable public static var http1_0: HTTPVersion { HTTPVersion(major: 1, minor: 0) }
    // swift-format-ignore: AlwaysUseLowerCamelCase
    @inlinable public static var http1_1: HTTPVersion { HTTPVersion(major: 1, minor: 1) }

    public var description: String { "HTTP/\(major).\(minor)" }
}

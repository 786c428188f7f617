/// An HTTP/1.x protocol version.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public let major: Int
    public let minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    // The protocol's own names (HTTP/1.0, HTTP/1.1) read better than camel case here.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(major).\(minor)" }
}

/// A request method token (RFC 9110 §9). Case-sensitive, as the RFC says.
public struct HTTPMethod: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let delete = HTTPMethod("DELETE")
    public static let patch = HTTPMethod("PATCH")
    public static let options = HTTPMethod("OPTIONS")
    public static let connect = HTTPMethod("CONNECT")
    public static let trace = HTTPMethod("TRACE")

    public var description: String { rawValue }

    /// Safe methods (RFC 9110 §9.2.1) do not change origin state.
    public var isSafe: Bool {
        self == .get || self == .head || self == .options || self == .trace
    }

    /// Idempotent methods (RFC 9110 §9.2.2) may be retried automatically.
    public var isIdempotent: Bool { isSafe || self == .put || self == .delete }
}

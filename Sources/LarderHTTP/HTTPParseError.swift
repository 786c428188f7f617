/// Why a request head or body was rejected, with the status to answer and a reason for the
/// client and the log. After any of these the connection is closed: the framing of whatever
/// follows can no longer be trusted (RFC 9112 §11.2).
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status to answer: 400, 414, 431, 501 or 505.
    public let status: Int
    /// One line for the client and the log.
    public let reason: String

    public init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    public var description: String { "\(status) \(reason)" }

    static func bad(_ reason: String) -> HTTPParseError { HTTPParseError(400, reason) }
}

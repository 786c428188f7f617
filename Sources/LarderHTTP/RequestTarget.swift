/// The four forms of request-target (RFC 9112 §3.2).
public enum RequestTarget: Sendable, Equatable {
    /// `http://host/path`: what a forward proxy expects.
    case absolute(AbsoluteURL)
    /// `/path`: meant for an origin server.
    case origin(String)
    /// `host:port`: CONNECT only.
    case authority(host: String, port: Int)
    /// `*`: OPTIONS only.
    case asterisk
}

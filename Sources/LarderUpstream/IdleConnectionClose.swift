/// Why a pooled upstream connection was closed while idle (``UpstreamClient/idleConnectionClosed``).
public enum IdleConnectionClose: String, Sendable, CaseIterable {
    /// Bytes arrived with no request outstanding: an unsolicited response (a late answer, a
    /// `408`), junk, or on https a TLS record such as close_notify.
    case data
    /// The origin closed or reset it (a keep-alive timeout).
    case closed
}

import LarderIO

/// A client as the fairness rules count it: its whole address (IPv6 whole, every host of a LAN
/// sharing its /64; IPv4 as ::ffff:a.b.c.d, so that one on a dual-stack socket is the same
/// client), as ``UpstreamShares/client(_:)`` spells it.
struct ClientAddress: Hashable, Sendable {
    let high: UInt64
    let low: UInt64

    init(words: (high: UInt64, low: UInt64)) {
        high = words.high
        low = words.low
    }

    /// nil: no address (a test's socket pair).
    init?(_ peer: SocketAddress?) {
        guard let words = UpstreamShares.client(peer) else { return nil }
        self.init(words: words)
    }
}

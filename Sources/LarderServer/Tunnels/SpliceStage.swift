/// Whether one client's CONNECTs to one intercepted host are decrypted, after how its
/// handshakes went (``SpliceTable`` keeps one per client and host): a client that refuses
/// Larder's certificate (it does not trust the CA, or it pins the origin's) would otherwise be
/// locked out, so after `tls.splice_after_failures` refusals in a row it is tunnelled blind
/// ("spliced") to that host for `tls.splice_for`, then tried again.
///
/// Pure: every transition takes the clock (monotonic nanoseconds) as a parameter.
enum SpliceStage: Equatable, Sendable {
    /// Decrypted; `failures` handshakes in a row have failed.
    case intercepting(failures: Int)
    /// Tunnelled blind until the monotonic time `until`.
    case spliced(until: UInt64)

    static let initial = SpliceStage.intercepting(failures: 0)

    /// Whether a CONNECT at `now` is intercepted, and the stage after it (a splice that has
    /// run out starts over).
    func admitting(now: UInt64) -> (intercept: Bool, next: SpliceStage) {
        switch self {
        case .intercepting: (true, self)
        case .spliced(let until) where now >= until: (true, .initial)
        case .spliced: (false, self)
        }
    }

    /// The stage after a handshake: a success clears the count; a failure adds to it, and the
    /// `threshold`-th in a row splices the host for `spliceFor` nanoseconds from `now`.
    func after(handshakeSucceeded: Bool, threshold: Int, spliceFor: UInt64, now: UInt64) -> SpliceStage {
        guard case .intercepting(let failures) = self else { return self }
        if handshakeSucceeded { return .initial }
        guard failures + 1 >= threshold else { return .intercepting(failures: failures + 1) }
        return .spliced(until: now &+ spliceFor)
    }
}

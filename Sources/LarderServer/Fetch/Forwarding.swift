import LarderHTTP
import LarderUpstream
import Logging

/// What every request that goes upstream shares, whether a fill fetches it or a tunnel carries
/// it: which loop fetches each key, the retry budget, the parents' health, and this hop's
/// `Via`. One instance, built by ``SharedState``.
///
/// Users: fills (attempts, retries, failover), the exchange (which loop fetches a key), CONNECT
/// (parents, `Via`), the admin routes (read only), ``Server`` (retry limits on reload).
///
/// State: immutable references; `fills`, `retryBudget` and `parentHealth` are thread-safe on
/// their own (one lock or atomics each); the parents' health is kept across reloads.
final class Forwarding: Sendable {
    /// Which loop fetches each key (several loops only).
    let fills = FillRegistry()
    /// Retries across all loops, capped at a share of upstream requests.
    let retryBudget: RetryBudget
    /// Parent proxies that are backing off, and per-parent counters.
    let parentHealth = ParentHealth()
    /// This process's identity in `Via` on forwarded requests (`1.1 larder (id)`), so a request
    /// that comes back through this same daemon is recognised as a loop (RFC 9110 §7.6.3).
    let viaIdentity: String
    /// This hop's `Via` element on forwarded requests and CONNECTs, built once.
    let viaElement: String
    private let logger: Logger

    init(retryRatio: Double, retryFloor: Int, logger: Logger) {
        retryBudget = RetryBudget(ratio: retryRatio, floor: retryFloor)
        viaIdentity = "larder-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        viaElement = "1.1 larder (\(viaIdentity))"
        self.logger = logger
    }

    /// The `Via` value a request goes on with: the elements it came with, then this hop's
    /// (RFC 9110 §7.6.3).
    func via(after headers: HTTPHeaders) -> String {
        headers.contains(.via) ? headers.combined("Via").map { $0 + ", " + viaElement } ?? viaElement : viaElement
    }

    /// A parent proxy could not be reached (by a fill or a tunnel): it is skipped for
    /// `backoff`, and the moment it goes down is logged once.
    func parentUnreachable(_ parent: ParentPlan.Parent, backoff: Duration, error: String) {
        guard parentHealth.recordFailure(parent, backoff: backoff) else { return }
        logger.warning(
            "parent proxy unreachable; skipping it for \(backoff.totalMilliseconds / 1000)s",
            metadata: ["parent": "\(parent.label)", "error": "\(error)"])
    }
}

import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// The destination policy on a client connection (docs/SECURITY.md, "Destinations"): a
/// target refused by its spelling, or a request that already came through this proxy, is
/// answered here; names are checked again on each address a transfer connects to
/// (``destinationCheck(host:runtime:)``, through the connection's ``DestinationGuard``).
extension ClientConnection {
    /// Refuses (403/508) a target the destination policy refuses by its spelling (an address in
    /// any form, a denied name) or a request that already came through this proxy. Returns
    /// whether it answered. Names are checked again on the address they resolve to.
    func refusesDestination(host: String, port: Int, exchange: Exchange) -> Bool {
        let runtime = exchange.runtime
        let verdict = destinations.check(
            host: host, port: port, headers: exchange.head.headers, identity: proxy.forwarding.viaIdentity, client: peer,
            generation: proxy.refreshDestinations(runtime), policy: { proxy.destinationPolicy(runtime) })
        switch verdict {
        case .allowed:
            return false
        case .refused(let refusal):
            refuseDestination(refusal, target: "\(host):\(port)", exchange: exchange)
        case .loop:
            exchange.keepAlive = false
            proxy.logger.warning(
                "forwarding loop detected",
                metadata: ["target": "\(host):\(port)", "via": "\(exchange.head.headers.combined("Via") ?? "")"])
            respondGenerated(
                status: 508, message: "Larder: forwarding loop (this request already passed through this proxy)", outcome: .error,
                cause: .loop)
        }
        return true
    }

    /// The check a fill's transfer runs on each address it connects to or reuses.
    func destinationCheck(host: String, runtime: RuntimeConfig) -> DestinationCheck {
        let policy = proxy.destinationPolicy(runtime)
        return destinations.connectCheck(host: host, client: peer, generation: proxy.destinationGeneration, policy: policy)
    }

    /// Answers 403 for a refused destination, with a log line naming the client and the target.
    func refuseDestination(_ refusal: DestinationPolicy.Refusal, target: String, exchange: Exchange) {
        exchange.keepAlive = false
        proxy.telemetry.stats[.destinationsRefused].add(1)
        proxy.logger.notice(
            "refused a destination",
            metadata: ["client": "\(peer?.description ?? "-")", "target": "\(target)", "reason": "\(refusal)"])
        respondGenerated(status: 403, message: "Larder: destination refused: \(refusal)", outcome: .error, cause: .refused)
    }
}

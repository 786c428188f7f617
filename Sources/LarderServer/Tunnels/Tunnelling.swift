import LarderConfig
import LarderIO
import LarderTLS
import Synchronization

/// What CONNECT and HTTPS interception share across loops: the threads that resolve tunnel
/// targets, how intercepted hosts' handshakes went, and the certificate counts of replaced
/// mints. One instance, built by ``SharedState``.
///
/// Users: ``ConnectHandler`` (resolve, splice decisions, handshake outcomes), the admin routes
/// (`/tls/hosts`, `/stats`, `/metrics`), ``Server`` (a reload that replaces the mint).
///
/// State: immutable references; `interceptedHosts` and `retiredMints` have one lock each, the
/// resolver index is an atomic; the resolver threads run until ``stop()``.
final class Tunnelling: Sendable {
    /// How intercepted hosts' client handshakes went, and which are spliced (tunnelled blind).
    let interceptedHosts = InterceptedHosts()
    /// What the mints a reload replaced (a rotated CA) had counted, so the totals only grow.
    let retiredMints = Locked(CertificateMint.Statistics())
    /// Threads that resolve CONNECT targets (getaddrinfo blocks, so never on a loop). Jobs go
    /// round-robin, so one slow DNS answer holds up only the lookups queued behind it.
    private let resolvers = (0..<4).map { BlockingWorker(name: "larder-dns-\($0)") }
    private let nextResolver = Atomic<Int>(0)

    /// Certificates minted and reused since the daemon started: the running mint's counts and
    /// those of the mints it replaced.
    func mintStatistics(current: TLSInterceptor?) -> CertificateMint.Statistics {
        var total = retiredMints.withLock { $0 }
        if let running = current?.mint.statistics {
            total.minted += running.minted
            total.hits += running.hits
        }
        return total
    }

    /// Resolves `host` on a resolver thread; `completion` runs on that thread, or at once for a
    /// name pinned in `upstream.resolve` (`pinned`: its addresses, without a lookup, as curl's
    /// transfers).
    func resolve(
        _ host: String, port: UInt16, pinned: [ResolveEntry],
        completion: @escaping @Sendable (Result<[SocketAddress], Resolver.Failure>) -> Void
    ) {
        if let addresses = ResolveEntry.addresses(for: host, port: Int(port), in: pinned) {
            completion(.success(addresses))
            return
        }
        let index = nextResolver.add(1, ordering: .relaxed).oldValue % resolvers.count
        resolvers[index].submit { completion(Resolver.resolve(host, port: port)) }
    }

    /// Ends the resolver threads (after the loops stopped).
    func stop() {
        for resolver in resolvers { resolver.stop() }
    }
}

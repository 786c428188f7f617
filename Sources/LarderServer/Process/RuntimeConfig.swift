import LarderCache
import LarderConfig
import LarderHTTP
import LarderTLS
import LarderUpstream

/// One loaded configuration with what is derived from it (the route index, limits in
/// nanoseconds). Immutable: a reload builds a new one and swaps it in, while requests already
/// running keep the one they started with.
public final class RuntimeConfig: Sendable {
    public let config: Config
    public let routes: RouteTable
    /// The parent proxies and how one is picked.
    public let parents: ParentPlan
    /// Increases with every successful reload.
    public let generation: Int
    /// The CA's mint and TLS settings for intercepted tunnels; nil when `tls.intercept` is empty.
    public let interceptor: TLSInterceptor?
    let headerTimeout: UInt64
    let idleTimeout: UInt64
    /// `upstream.connect_timeout` and `upstream.timeout` in nanoseconds, which every upstream
    /// request carries.
    let upstreamConnectTimeout: UInt64
    let upstreamTimeout: UInt64
    /// `cache.negative_ttl` in seconds, read on every lookup.
    let negativeTTL: Double
    /// What every fill started under this configuration reads of it.
    let fill: FillSettings
    /// `proxy.setup_host`'s length in bytes (0: no setup page), which most hosts differ from.
    let setupHostLength: Int

    /// The key a GET for `url` is stored under: its route's (purges find an entry a route keyed
    /// its own way).
    func key(for url: AbsoluteURL) -> CacheKey {
        CacheKey(
            url, route: routes.match(method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery))
    }

    public init(config: Config, generation: Int = 0, interceptor: TLSInterceptor? = nil) {
        self.config = config
        self.interceptor = interceptor
        routes = RouteTable(config.routes)
        parents = ParentPlan(config.upstream, routes: config.routes)
        self.generation = generation
        headerTimeout = config.proxy.headerTimeout.totalNanoseconds
        idleTimeout = config.proxy.idleTimeout.totalNanoseconds
        upstreamConnectTimeout = config.upstream.connectTimeout.totalNanoseconds
        upstreamTimeout = config.upstream.timeout.totalNanoseconds
        fill = FillSettings(config)
        negativeTTL = fill.negativeTTL
        setupHostLength = config.proxy.setupHost.utf8.count
    }
}

import LarderIO

/// Everything Larder is wired by: the typed form of `larder.toml`. Every field has the default
/// documented in `config/larder.toml`, so `Config()` is a runnable configuration.
public struct Config: Sendable, Equatable {
    public var proxy = ProxyConfig()
    public var admin = AdminConfig()
    public var memory = MemoryConfig()
    public var disk = DiskConfig()
    public var upstream = UpstreamConfig()
    public var retry = RetryConfig()
    public var cache = CacheConfig()
    public var coalesce = CoalesceConfig()
    public var log = LogConfig()
    public var tls = TLSConfig()
    /// `[[route]]` entries, first match wins.
    public var routes: [Route] = []

    public init() {}
}

/// `[proxy]`: the client-facing listener.
public struct ProxyConfig: Sendable, Equatable {
    public var listen: [SocketAddress] = [SocketAddress(parsing: "127.0.0.1:3128")!]
    public var allow: [CIDR] = [CIDR(parsing: "127.0.0.0/8")!, CIDR(parsing: "::1/128")!]
    public var connectPorts: [Int] = [443]
    public var maxConnections = 10_000
    public var headerTimeout: Duration = .seconds(10)
    public var idleTimeout: Duration = .seconds(60)
    public var maxHeaderBytes = 64 * 1024
    /// Event-loop threads; nil ("auto") means one per CPU the process may use
    /// (`CPUBudget`: affinity and cgroup quota).
    public var workers: Int?
    /// How long an event loop with nothing to do keeps polling before it sleeps; 0 never polls
    /// (`EventLoop.busyPollNanos`: lower latency at low load, for CPU a shared host needs).
    public var busyPoll: Duration = .zero
    /// On SIGTERM, how long in-flight requests may take to finish before connections are closed.
    public var drainTimeout: Duration = .seconds(10)
    /// A CONNECT tunnel with no bytes either way for this long is closed.
    public var tunnelIdleTimeout: Duration = .seconds(300)
    /// Users allowed through when proxy authentication is on; empty means no authentication.
    public var authUsers: [ProxyUser] = []
    /// Where more `authUsers` were read from (`proxy.auth_users_file`); empty when none.
    public var authUsersFile = ""
    /// The realm named in `Proxy-Authenticate`.
    public var authRealm = "Larder"
    /// Request bodies up to this size are read and checked whole before anything goes upstream.
    public var requestBodyBuffer = 64 * 1024
    /// Whether local clients may reach loopback, link-local and this host's own addresses;
    /// nil means "only when every proxy listener is on loopback" (decided on the sockets bound).
    public var allowLocalDestinations: Bool?
    /// Destinations refused (names and CIDRs on the address connected to).
    public var denyDestinations: [HostRule] = []
    /// Destinations allowed even when local or in `denyDestinations` (never this daemon's own
    /// listeners).
    public var allowDestinations: [HostRule] = []
    /// The host name whose plain-HTTP requests through the proxy Larder answers itself with its
    /// onboarding page (CA, PAC file, setup per tool); empty turns the page off.
    public var setupHost = "larder.setup"
    public init() {}
}

/// One `proxy.auth_users` entry: a user name and its password hash in crypt(3) form
/// (yescrypt `$y$`, bcrypt `$2b$`, SHA-512 `$6$`, ...), as `larder hash-password` prints it.
public struct ProxyUser: Sendable, Equatable {
    public var name: String
    public var passwordHash: String
    public init(name: String, passwordHash: String) {
        self.name = name
        self.passwordHash = passwordHash
    }

    /// The crypt(3) hash prefixes accepted: slow, salted schemes only (no DES, no MD5).
    public static let hashPrefixes = ["$y$", "$gy$", "$7$", "$2b$", "$2y$", "$6$", "$5$"]
    /// The longest user name accepted (credentials naming a longer one are refused at once).
    public static let maxNameBytes = 256
}

/// `[admin]`: stats, metrics, purge.
public struct AdminConfig: Sendable, Equatable {
    public var listen: SocketAddress? = SocketAddress(parsing: "127.0.0.1:3129")
    public var token = ""
    /// Where `token` was read from (`admin.token_file`), for the check that warns when others
    /// may read it; empty when the token is inline or absent.
    public var tokenFile = ""
    /// Names besides the listener's own address and localhost that requests may carry in
    /// `Host` (`name` for any port, `name:port` for one): a reverse proxy's or a container's.
    public var allowHosts: [String] = []
    public init() {}
}

/// `[memory]`: the in-memory LRU tier.
public struct MemoryConfig: Sendable, Equatable {
    public var maxBytes = 256 * 1024 * 1024
    public var maxEntries = 100_000
    public var maxObjectBytes = 16 * 1024 * 1024
    public init() {}
}

/// `[disk]`: the persistent tier.
public struct DiskConfig: Sendable, Equatable {
    public var path = ".larder-cache"
    public var maxBytes: Int64 = 10 * 1024 * 1024 * 1024
    public var maxObjectBytes: Int64 = 2 * 1024 * 1024 * 1024
    /// Bytes per second the background scrub reads to check entries over 1 MiB; 0 turns it off.
    public var scrubRate: Int64 = 16 * 1024 * 1024
    /// Whether `serve` refuses to start without its disk tier (an unusable directory) rather
    /// than run memory-only. nil ("auto"): required when started by systemd (`$INVOCATION_ID`
    /// set), where a unit that starts but does not cache is worse than one that fails visibly.
    public var required: Bool?
    public init() {}
}

/// `[tls]`: which CONNECT tunnels are decrypted and cached, and the local CA that signs the
/// certificates their clients are shown (docs/SECURITY.md, "HTTPS interception").
public struct TLSConfig: Sendable, Equatable {
    /// Hosts (exact names or `*.` domains) whose tunnels are intercepted; empty turns it off.
    public var intercept: [HostRule] = []
    /// Hosts always tunnelled blind, even when `intercept` matches.
    public var never: [HostRule] = []
    /// Holds `ca.pem` and `ca.key`; relative paths are from the working directory.
    public var caDirectory = "larder-ca"
    /// Lifetime of the certificates minted for clients.
    public var leafValidity: Duration = .seconds(7 * 86_400)
    /// Extra trust anchors for origins (PEM); the system store is always used. Empty: none.
    public var upstreamCAFile = ""
    /// Refusals of the certificate in a row from one client address for a host, after which
    /// that client alone is tunnelled blind to it.
    public var spliceAfterFailures = 3
    /// How long such a client stays tunnelled blind to the host.
    public var spliceFor: Duration = .seconds(3600)
    public init() {}

    /// Whether a CONNECT to `host` is decrypted: listed in `intercept` and not in `never`.
    public func intercepts(host: String) -> Bool {
        intercept.contains { $0.matches(host: host) } && !never.contains { $0.matches(host: host) }
    }
}

/// `[upstream]`: how origins are reached.
public struct UpstreamConfig: Sendable, Equatable {
    public var connectTimeout: Duration = .seconds(5)
    public var timeout: Duration = .seconds(60)
    /// A response body must average at least this many bytes a second over every
    /// `timeout`-long window (paused time aside); 0 turns the check off.
    public var minRate = 64
    /// One parent proxy URL: the same as `parents = [parent]`.
    public var parent = ""
    /// Parent proxies (cache hierarchy); misses go through one of them.
    public var parents: [String] = []
    /// How a parent is picked for a request.
    public var parentSelection: ParentSelection = .hash
    /// A parent that failed is skipped for this long.
    public var parentBackoff: Duration = .seconds(30)
    /// Hosts that bypass the parents.
    public var direct: [HostRule] = []
    public var maxConnectionsPerHost = 32
    /// Host names pinned to addresses (curl's CURLOPT_RESOLVE), for requests and tunnels alike.
    public var resolve: [ResolveEntry] = []
    public init() {}

    /// The parents in configuration order (`parent` and `parents` are never both set).
    public var parentList: [String] { parent.isEmpty ? parents : [parent] }
}

/// `upstream.parent_selection`.
public enum ParentSelection: String, Sendable, CaseIterable {
    /// Rendezvous (highest random weight) hashing of the URL: each object has one home parent,
    /// so it is cached once in the parent tier; when that parent is down the next-highest
    /// takes over and only its share of URLs moves.
    case hash
    /// The first parent that is up, in the order listed.
    case failover
}

/// `[retry]` and per-route retry overrides.
public struct RetryConfig: Sendable, Equatable {
    public enum Strategy: String, Sendable, CaseIterable { case exponential, linear, none }
    public enum Condition: String, Sendable, CaseIterable, Comparable {
        case connect, timeout, reset
        case status5xx = "5xx"
        case status500 = "500"
        case status429 = "429"
        public static func < (a: Condition, b: Condition) -> Bool { a.rawValue < b.rawValue }
    }

    public var strategy: Strategy = .exponential
    public var maxAttempts = 3
    public var baseDelay: Duration = .milliseconds(200)
    public var multiplier = 2.0
    public var maxDelay: Duration = .seconds(10)
    public var jitter: Duration = .milliseconds(100)
    public var retryOn: Set<Condition> = [.connect, .timeout, .status5xx]
    /// Retries may add at most this share of upstream requests over a 10 s window...
    public var budgetRatio = 0.2
    /// ...but this many retries per window are always allowed.
    public var budgetMin = 10
    public init() {}
}

/// Per-route cache behaviour (DESIGN "Policies").
public enum CachePolicy: String, Sendable, CaseIterable {
    case http
    case networkOnly = "network_only"
    case cacheFirst = "cache_first"
    case cacheThenNetwork = "cache_then_network"
    case staleWhileRevalidate = "stale_while_revalidate"
    /// Stored by the HTTP rules, but revalidated with the origin before every use (package
    /// indexes); served stale only under stale-if-error.
    case revalidate
}

/// `cache.admission`: which storable responses are stored once the cache is full.
public enum AdmissionPolicy: String, Sendable, CaseIterable {
    /// Every storable response (plain least-recently-used replacement).
    case always
    /// A response over `cache.admission_min_bytes` is stored on the second request for it within
    /// a window (TinyLFU's doorkeeper), so one-off large downloads do not evict what is reused.
    case secondRequest = "second_request"
}

/// `[cache]`: global cache behaviour.
public struct CacheConfig: Sendable, Equatable {
    public var defaultPolicy: CachePolicy = .http
    public var staleIfError: Duration = .seconds(3600)
    /// The longest any answer other than a success (200, or 206 for a slice) stays fresh,
    /// whatever its headers or the route say: one client asking for a version not yet published
    /// must not make it fail for every other client for longer (RFC 9111 §4.2.1 lets a cache
    /// shorten a lifetime). 0 stores none.
    public var negativeTTL: Duration = .seconds(30)
    /// Serve everything stored, however stale, and never contact upstream.
    public var offline = false
    /// A Range request for an object not yet stored fetches the whole object (to store it) when
    /// it is cacheable and at most this large; larger or uncacheable ones pass the range through.
    public var rangeWholeMax = 16 * 1024 * 1024
    /// Objects larger than this are fetched and stored as fixed slices of this size, with Range
    /// requests upstream (as nginx's slice module); 0 stores every object whole. Slices live in
    /// the disk tier, so without one nothing is sliced.
    public var sliceSize = 8 * 1024 * 1024
    /// Ecosystems whose routes are added after the file's own (``Preset``).
    public var presets: [Preset] = []
    /// Which responses are stored once the tier that keeps them is full (evicting to make room).
    public var admission: AdmissionPolicy = .secondRequest
    /// Responses of at most this many bytes are stored on their first request under
    /// ``AdmissionPolicy/secondRequest``.
    public var admissionMinBytes = 8 * 1024
    public init() {}
}

/// Which requests share one upstream fill.
public enum DedupPolicy: String, Sendable, CaseIterable {
    case automatic, always, never
}

/// `[coalesce]`: bounds on shared fills.
public struct CoalesceConfig: Sendable, Equatable {
    /// Clients sharing one fill; more go upstream on their own.
    public var maxWaiters = 1000
    /// How long a client waits for a shared fill's response head before going on its own.
    public var waitTimeout: Duration = .seconds(30)
    /// When every client of a cacheable fill has left, it is completed anyway if at most this
    /// much of the body remains (so the next client gets a hit); otherwise it is cancelled.
    public var finishAbandonedMax = 64 * 1024 * 1024
    /// How long a URL whose response could not be shared is fetched without coalescing.
    public var notShareableTTL: Duration = .seconds(10)
    public init() {}
}

/// `[log]`.
public struct LogConfig: Sendable, Equatable {
    public enum Level: String, Sendable, CaseIterable { case trace, debug, info, notice, warning, error, critical }
    public var level: Level = .info
    /// One access-log line per request.
    public var access = true
    /// Where access lines go: a file (appended to, reopened on SIGUSR1 for log rotation), or
    /// stdout when empty.
    public var accessFile = ""
    /// Whether requests to the admin listener (a dashboard polls every second) are logged too.
    public var adminRequests = false
    /// The access lines' format: Larder's own, Squid's native (calamaris, SARG, GoAccess),
    /// NCSA combined, or one JSON object per line.
    public var accessFormat = AccessFormat.larder
    public enum AccessFormat: String, Sendable, CaseIterable { case larder, squid, combined, json }
    /// Query parameters whose values access lines and cache listings replace (signatures and
    /// tokens: whoever reads them could fetch what the URL grants).
    public var redactQuery = QueryRedaction(names: QueryRedaction.defaultNames)
    public init() {}
}

/// A `[[route]]` entry: requests matching `match` (and `methods`) use its settings.
public struct Route: Sendable, Equatable {
    public var match: URLPattern
    public var methods: [String]?
    public var policy: CachePolicy?
    public var ttl: Duration?
    public var dedup: DedupPolicy?
    public var timeout: Duration?
    public var minRate: Int?
    public var retry: RetryConfig?
    /// The route's requests may be retried whatever their method (POST that is safe to repeat).
    public var idempotent: Bool?
    /// The route's parent proxy URL, or "direct" to bypass `upstream` parents.
    public var parent: String?
    /// How the cache key is built (nil: the normalized URL).
    public var key: KeyTemplate?
    /// Query parameters left out of the key (globs on their names, compared without case): the
    /// signatures of short-lived CDN URLs, so the next signed URL for an object is a hit.
    public var ignoreQuery: [String] = []
    /// The route's objects never change under one URL (package files, content-addressed
    /// blobs): kept whatever their headers say (`cache_first`, a ten-year `ttl`, unless set),
    /// and a `key` or `ignore_query` that leaves out part of the URL is allowed.
    public var immutable = false
    /// The body must hash to the URL's `{digest}` capture with this algorithm (content
    /// addressing): such a route is immutable, and its key may leave out the host.
    public var digest: DigestAlgorithm?
    /// Whether the key is not simply the URL.
    public var hasCustomKey: Bool { key != nil || !ignoreQuery.isEmpty }
    /// Where the route came from: nil for the file, `preset NAME` for a preset's.
    public var source: String?

    public init(match: URLPattern) { self.match = match }
}

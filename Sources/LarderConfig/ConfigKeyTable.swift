/// Every configuration key, in config/larder.toml's order, with its type, its default as the
/// file writes it, its help text and its reload class: the one list that the decoder (its
/// sections and keys, ``ConfigDecoder/schema``, ``ConfigDecoder/routeKeys``), reload,
/// `check-config` and the documentation (config/larder.toml's values, comments and "restart
/// to change", docs/OPERATIONS.md, "Reload") follow; unit tests hold the documents and the
/// decoder to it. Adding a key is an entry here, its field in ``Config``, its case in the
/// decoder, and its line in config/larder.toml.
public enum ConfigKeyTable {
    public static let entries: [ConfigKeyEntry] = Array(
        [proxy, admin, memory, disk, upstream, retry, cache, coalesce, log, tls, routes].joined())

    private static let proxy: [ConfigKeyEntry] = [
        .restart(
            "proxy.listen", .list, #"["127.0.0.1:3128"]"#,
            #"proxy listen addresses ("[::1]:3128" for IPv6); restart to change"#,
            keep: { $0.proxy.listen = $1.proxy.listen }, show: { $0.proxy.listen.map(\.description).joined(separator: ", ") }),
        .live("proxy.allow", .list, #"["127.0.0.0/8", "::1/128"]"#, "client networks allowed to use the proxy; others get 403"),
        .live("proxy.connect_ports", .list, "[443]", "CONNECT tunnels only to these ports"),
        .live("proxy.max_connections", .integer, "10000", "open client connections; at the limit the longest-idle one is closed, else 503"),
        .live("proxy.header_timeout", .duration, #""10s""#, "a request head must arrive within this (408 otherwise)"),
        .live("proxy.idle_timeout", .duration, #""60s""#, "keep-alive connections idle this long are closed"),
        .live("proxy.max_header_bytes", .size, #""64KiB""#, "larger request heads get 431"),
        .restart(
            "proxy.workers", .integerOrAuto, #""auto""#,
            #"event-loop threads: "auto" = the CPUs this process may use (affinity, cgroup quota); restart to change"#,
            keep: { $0.proxy.workers = $1.proxy.workers }, show: { $0.proxy.workers.map(String.init) ?? "auto" }),
        .live(
            "proxy.busy_poll", .duration, #""0""#,
            #"an idle loop polls this long before sleeping ("100us"): lower latency at low load, for CPU"#),
        .live("proxy.drain_timeout", .duration, #""10s""#, "on SIGTERM, in-flight requests get this long to finish"),
        .live("proxy.tunnel_idle_timeout", .duration, #""5m""#, "a CONNECT tunnel with no traffic either way is closed after this"),
        .live(
            "proxy.auth_users", .list, "[]",
            #"Proxy authentication (Proxy-Authorization: Basic). Empty = off. Each entry is "name:HASH" where HASH comes from `larder hash-password NAME` (crypt(3): yescrypt, bcrypt or SHA-512; plain passwords are refused). Clients: http_proxy=http://name:pw@host:3128"#
        ),
        .live(
            "proxy.auth_users_file", .path, #""""#,
            #"more "name:HASH" lines from this file (# comments); kept out of this file, re-read on SIGHUP"#),
        .live("proxy.auth_realm", .string, #""Larder""#, "named in Proxy-Authenticate"),
        .live(
            "proxy.request_body_buffer", .size, #""64KiB""#,
            "request bodies up to this are read and checked whole before going upstream; larger ones stream"),
        .live(
            "proxy.allow_local_destinations", .boolOrAuto, #""auto""#,
            #"Destinations, checked on the address really connected to (docs/SECURITY.md). This daemon's own listeners and 0.0.0.0/:: are always refused (403). Loopback, link-local and this host's own addresses are "local": reachable only by local clients, and only when allow_local_destinations is true ("auto": true when every proxy listener is on loopback)."#
        ),
        .live("proxy.deny_destinations", .list, "[]", #"hosts, "*.domain" patterns or CIDRs always refused, e.g. ["10.0.0.0/8"]"#),
        .live("proxy.allow_destinations", .list, "[]", #"exceptions to the two rules above, e.g. ["mirror.lan", "127.0.0.1/32"]"#),
        .live(
            "proxy.setup_host", .string, #""larder.setup""#,
            #"http://larder.setup/ through the proxy: Larder's onboarding page (CA, PAC, setup per tool); "" turns it off"#),
    ]

    private static let admin: [ConfigKeyEntry] = [
        .restart(
            "admin.listen", .string, #""127.0.0.1:3129""#,
            #"stats, metrics, purge; "" turns it off; restart to change"#,
            keep: { $0.admin.listen = $1.admin.listen }, show: { $0.admin.listen?.description ?? "off" }),
        .live("admin.token", .string, #""""#, #"if set, mutating admin calls need "Authorization: Bearer <token>""#),
        .live(
            "admin.token_file", .path, #""""#,
            #"or read the token from this file (re-read on SIGHUP); "${CREDENTIALS_DIRECTORY}/admin-token" with systemd's LoadCredential= (both empty: the credential admin-token applies when systemd passes one)"#
        ),
        .live(
            "admin.allow_hosts", .list, "[]",
            #"names Host may carry besides the listener's address and localhost ("name" or "name:port"; a reverse proxy's)"#),
    ]

    private static let memory: [ConfigKeyEntry] = [
        .live("memory.max_bytes", .size, #""256MiB""#, "memory tier size (least recently used entries evicted)"),
        .live("memory.max_entries", .integer, "100000", "memory tier entry count"),
        .live(
            "memory.max_object_bytes", .size, #""16MiB""#,
            "larger objects are kept on disk only (a sliced object counts whole); at most max_bytes"),
    ]

    private static let disk: [ConfigKeyEntry] = [
        .restart(
            "disk.path", .path, #"".larder-cache""#,
            #"cache directory, relative to the state directory (docs/OPERATIONS.md, "Paths"); restart to change"#,
            keep: { $0.disk.path = $1.disk.path }, show: { $0.disk.path }),
        .live("disk.max_bytes", .size, #""10GiB""#, "disk tier size, at least 1MiB (least recently used entries evicted)"),
        .live("disk.max_object_bytes", .size, #""2GiB""#, "larger responses are streamed but never stored; at most max_bytes"),
        .live(
            "disk.scrub_rate", .size, #""16MiB""#,
            #"per second: a background check of entries over 1 MiB against their checksums; "0B" = off"#),
        .restart(
            "disk.required", .boolOrAuto, #""auto""#,
            #"refuse to start without the disk tier (unusable path); "auto": true under systemd; restart to change"#,
            keep: { $0.disk.required = $1.disk.required }, show: { $0.disk.required.map(String.init) ?? "auto" }),
    ]

    private static let upstream: [ConfigKeyEntry] = [
        .live("upstream.connect_timeout", .duration, #""5s""#, "connecting to an origin"),
        .live("upstream.timeout", .duration, #""60s""#, "per attempt: until the response head, then any stall of the body"),
        .live(
            "upstream.min_rate", .size, #""64B""#, #"per second: a body averaging less over a `timeout` window is cut (504); "0B" = off"#),
        .live("upstream.parent", .string, #""""#, #"optional parent proxy URL ("http://user:pass@parent:3128")"#),
        .live("upstream.parents", .list, "[]", "several parent proxies instead of one (set parent or parents, not both)"),
        .live(
            "upstream.parent_selection", .choice(of: ParentSelection.self), #""hash""#,
            "hash: each URL has a home parent (rendezvous hashing) | failover: first that is up"),
        .live("upstream.parent_backoff", .duration, #""30s""#, "a parent that fails to connect is skipped this long"),
        .live("upstream.direct", .list, "[]", #"hosts that bypass parents: "localhost", "*.internal", "10.0.0.0/8" (IP-literal hosts)"#),
        .live(
            "upstream.max_connections_per_host", .integer, "32",
            "connections to one origin per loop (one client: half); more requests queue"),
        .live(
            "upstream.resolve", .list, "[]",
            #"pin names to addresses, curl's CURLOPT_RESOLVE: ["deb.debian.org:80:192.0.2.7"]; tunnels too; the destination policy still applies"#
        ),
    ]

    private static let retry: [ConfigKeyEntry] = [
        .live("retry.strategy", .choice(of: RetryConfig.Strategy.self), #""exponential""#, "exponential | linear | none"),
        .live("retry.max_attempts", .integer, "3", "retries after the first try"),
        .live("retry.base_delay", .duration, #""200ms""#, "first retry delay (linear: every delay)"),
        .live("retry.multiplier", .number, "2.0", "exponential growth of the delay"),
        .live("retry.max_delay", .duration, #""10s""#, "cap on one delay"),
        .live("retry.jitter", .duration, #""100ms""#, "random extra delay in [0, jitter]"),
        .live("retry.retry_on", .list, #"["connect", "timeout", "5xx"]"#, "connect | timeout | reset | 5xx | 500 | 429"),
        .live("retry.budget_ratio", .number, "0.2", "retries may add at most this share of upstream requests (10 s window)"),
        .live("retry.budget_min", .integer, "10", "...but this many retries per window are always allowed"),
    ]

    private static let cache: [ConfigKeyEntry] = [
        .live(
            "cache.default_policy", .choice(of: CachePolicy.self), #""http""#,
            "http | network_only | cache_first | cache_then_network | stale_while_revalidate | revalidate"),
        .live("cache.stale_if_error", .duration, #""1h""#, "serve stale when upstream fails, within this window"),
        .live(
            "cache.negative_ttl", .duration, #""30s""#,
            "cap on how long a non-success answer (404, 410, a redirect...) is kept, on every route: a client asking for a version not yet published fails for others this long at most"
        ),
        .live("cache.offline", .bool, "false", "serve everything stored, however stale; never contact upstream"),
        .live("cache.slice_size", .size, #""8MiB""#, #"larger objects are fetched and stored in slices of this size ("0": whole)"#),
        .live(
            "cache.range_whole_max", .size, #""16MiB""#, "slicing off: a Range miss fetches (and stores) the whole object up to this size"),
        .live(
            "cache.admission", .choice(of: AdmissionPolicy.self), #""second_request""#,
            "always | second_request: once the cache is full, a response over admission_min_bytes is stored on its second request (docs/CACHING.md)"
        ),
        .live("cache.admission_min_bytes", .size, #""8KiB""#, "...smaller responses are stored on their first"),
        .live(
            "cache.presets", .list, "[]",
            "debian ubuntu pypi npm cargo go oci github-releases rpm: routes for each ecosystem after the file's own (larder check-config --explain lists them)"
        ),
    ]

    private static let coalesce: [ConfigKeyEntry] = [
        .live("coalesce.max_waiters", .integer, "1000", "clients sharing one upstream fill; more go upstream on their own"),
        .live("coalesce.wait_timeout", .duration, #""30s""#, "a client waits this long for a shared fill's head, then goes on its own"),
        .live(
            "coalesce.finish_abandoned_max", .size, #""64MiB""#,
            "all clients gone: finish a cacheable fill if at most this much remains (and comes fast enough)"),
        .live(
            "coalesce.not_shareable_ttl", .duration, #""10s""#, "after a response that may not be shared, fetch that URL without coalescing"
        ),
    ]

    private static let log: [ConfigKeyEntry] = [
        .live(
            "log.level", .choice(of: LogConfig.Level.self), #""info""#,
            "trace | debug | info | notice | warning | error | critical; a reload applies it"),
        .live("log.access", .bool, "true", "one access-log line per request"),
        .live(
            "log.access_format", .choice(of: LogConfig.AccessFormat.self), #""larder""#,
            "larder | squid (native: calamaris, SARG, GoAccess) | combined (NCSA) | json"),
        .restart(
            "log.access_file", .path, #""""#,
            #"append access lines to this file ("": stdout); SIGUSR1 reopens it (logrotate); restart to change"#,
            keep: { $0.log.accessFile = $1.log.accessFile }, show: { $0.log.accessFile.isEmpty ? "stdout" : $0.log.accessFile }),
        .live("log.admin_requests", .bool, "false", "also log requests to the admin listener (the dashboard polls every second)"),
        .live(
            "log.redact_query", .list,
            #"["X-Amz-*", "X-Goog-*", "Signature", "Key-Pair-Id", "Policy", "sig", "se", "token", "*_token", "*-token", "jwt", "key", "api_key", "apikey", "*secret*", "password"]"#,
            "query parameters (case-insensitive, * globs) whose values access lines, daemon log lines and GET /cache write as REDACTED"),
    ]

    private static let tls: [ConfigKeyEntry] = [
        .live(
            "tls.intercept", .list, "[]", #"host names and "*.domain" globs whose CONNECT tunnels are decrypted and cached; empty = off"#),
        .live("tls.never", .list, "[]", "hosts always tunnelled blind, even if intercept matches"),
        .live(
            "tls.ca_dir", .path, #""larder-ca""#,
            "holds ca.pem and ca.key (larder ca init); relative paths here resolve against the state directory"),
        .live("tls.leaf_validity", .duration, #""7d""#, "lifetime of the certificates minted for clients (1h to 398d)"),
        .live("tls.upstream_ca_file", .path, #""""#, "extra trust anchors for origins (PEM); the system store is always used"),
        .live(
            "tls.splice_after_failures", .integer, "3",
            "refusals of the certificate in a row from one client address before that client alone is tunnelled blind to the host"),
        .live("tls.splice_for", .duration, #""1h""#, "... for this long (larder tls lists splices, larder tls clear ends them)"),
    ]

    private static let routes: [ConfigKeyEntry] = [
        .route("match", .string, "scheme://host[:port]/path with * globs: the URLs the route applies to; first match wins"),
        .route("methods", .list, #"the request methods the route applies to (unset: every method), e.g. ["POST"]"#),
        .route(
            "policy", .choice(of: CachePolicy.self),
            #"one of cache.default_policy's values, for this route (docs/CACHING.md, "Route policies")"#),
        .route("ttl", .duration, "cache_first: stored 200s are served while younger than this, whatever their headers say"),
        .route("dedup", .choice(of: DedupPolicy.self), "automatic | always | never"),
        .route("timeout", .duration, "upstream.timeout for this route"),
        .route("min_rate", .size, "upstream.min_rate for this route"),
        .route("idempotent", .bool, "these POSTs may be retried like GETs"),
        .route("parent", .string, #""direct" bypasses upstream parents for this route (or a proxy URL of its own)"#),
        .route("key", .string, "one entry for the mirrors with this key ({scheme} {host} {port} {path} {query}, or match's captures)"),
        .route(
            "ignore_query", .list,
            "signatures of short-lived URLs leave the key (a key or ignore_query that drops part of the URL needs immutable)"),
        .route("immutable", .bool, "files that never change under a URL: kept whatever Cache-Control says"),
        .route(
            "digest", .choice(of: DigestAlgorithm.self),
            "sha256 | sha512: the body must hash to the URL's {digest}; never stored otherwise (502)"),
    ]

    /// The keys a reload cannot apply.
    public static var restartOnly: [ConfigKeyEntry] { entries.filter { $0.reload == .restart } }

    /// The restart-only keys whose value differs between `running` and `loaded`.
    public static func restartChanges(from running: Config, to loaded: Config) -> [ConfigKeyEntry] {
        restartOnly.filter { entry in
            var kept = loaded
            entry.keep?(&kept, running)
            return kept != loaded
        }
    }

    /// `loaded` with every restart-only key as it runs in `running`: what a reload applies.
    public static func keepingRestartOnly(_ loaded: Config, from running: Config) -> Config {
        var config = loaded
        for entry in restartOnly { entry.keep?(&config, running) }
        return config
    }
}

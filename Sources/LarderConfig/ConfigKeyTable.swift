/// Every configuration key with its reload class, in config/larder.toml's order: the one list
/// that the decoder (its sections and keys, ``ConfigDecoder/schema``), reload, `check-config`
/// and the documentation (config/larder.toml's keys and "restart to change", docs/OPERATIONS.md,
/// "Reload") follow; unit tests hold the documents to it.
public enum ConfigKeyTable {
    public static let entries: [ConfigKeyEntry] =
        [
            .restart(
                "proxy.listen", keep: { $0.proxy.listen = $1.proxy.listen },
                show: { $0.proxy.listen.map(\.description).joined(separator: ", ") }),
            .live("proxy.allow"), .live("proxy.connect_ports"), .live("proxy.max_connections"), .live("proxy.header_timeout"),
            .live("proxy.idle_timeout"), .live("proxy.max_header_bytes"),
            .restart("proxy.workers", keep: { $0.proxy.workers = $1.proxy.workers }, show: { $0.proxy.workers.map(String.init) ?? "auto" }),
            .live("proxy.busy_poll"), .live("proxy.drain_timeout"), .live("proxy.tunnel_idle_timeout"), .live("proxy.auth_users"),
            .live("proxy.auth_users_file"), .live("proxy.auth_realm"), .live("proxy.request_body_buffer"),
            .live("proxy.allow_local_destinations"), .live("proxy.deny_destinations"), .live("proxy.allow_destinations"),
            .live("proxy.setup_host"),
            .restart(
                "admin.listen", keep: { $0.admin.listen = $1.admin.listen }, show: { $0.admin.listen?.description ?? "off" }),
            .live("admin.token"), .live("admin.token_file"), .live("admin.allow_hosts"),
            .live("memory.max_bytes"), .live("memory.max_entries"), .live("memory.max_object_bytes"),
            .restart("disk.path", keep: { $0.disk.path = $1.disk.path }, show: { $0.disk.path }),
            .live("disk.max_bytes"), .live("disk.max_object_bytes"), .live("disk.scrub_rate"),
            // Consulted once, when the disk tier is set up at start.
            .restart(
                "disk.required", keep: { $0.disk.required = $1.disk.required }, show: { $0.disk.required.map(String.init) ?? "auto" }),
        ]
        + [
            "upstream.connect_timeout", "upstream.timeout", "upstream.min_rate", "upstream.parent", "upstream.parents",
            "upstream.parent_selection", "upstream.parent_backoff", "upstream.direct", "upstream.max_connections_per_host",
            "upstream.resolve",
            "retry.strategy", "retry.max_attempts", "retry.base_delay", "retry.multiplier", "retry.max_delay", "retry.jitter",
            "retry.retry_on", "retry.budget_ratio", "retry.budget_min",
            "cache.default_policy", "cache.stale_if_error", "cache.negative_ttl", "cache.offline", "cache.slice_size",
            "cache.range_whole_max", "cache.admission", "cache.admission_min_bytes", "cache.presets",
            "coalesce.max_waiters", "coalesce.wait_timeout", "coalesce.finish_abandoned_max", "coalesce.not_shareable_ttl",
        ].map(ConfigKeyEntry.live)
        + [
            .live("log.level"), .live("log.access"), .live("log.access_format"),
            .restart(
                "log.access_file", keep: { $0.log.accessFile = $1.log.accessFile },
                show: { $0.log.accessFile.isEmpty ? "stdout" : $0.log.accessFile }),
            .live("log.admin_requests"), .live("log.redact_query"),
        ]
        + [
            "tls.intercept", "tls.never", "tls.ca_dir", "tls.leaf_validity", "tls.upstream_ca_file", "tls.splice_after_failures",
            "tls.splice_for",
        ].map(ConfigKeyEntry.live)
        // A reload rebuilds the route table.
        + ConfigDecoder.routeKeys.map { .live("route." + $0) }

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

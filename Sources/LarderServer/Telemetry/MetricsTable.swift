import LarderUpstream

/// Every `/metrics` series, declared once: name, help, type, labels, and how to read its value
/// from the `/stats` document. ``MetricsExporter`` registers and renders exactly these rows,
/// so a series cannot be declared and then silently never set.
struct MetricRow: Sendable {
    enum Kind: Sendable {
        /// Only grows; each scrape adds the difference since the last.
        case counter
        /// Set to the value read at each scrape.
        case gauge
    }

    let name: String
    let help: String
    let kind: Kind
    let labels: [(String, String)]
    let value: @Sendable (StatsDocument) -> Int

    init(
        _ kind: Kind, _ name: String, _ help: String, _ labels: [(String, String)] = [], _ value: @escaping @Sendable (StatsDocument) -> Int
    ) {
        self.kind = kind
        self.name = name
        self.help = help
        self.labels = labels
        self.value = value
    }
}

enum MetricsTable {
    static let rows: [MetricRow] = {
        var rows: [MetricRow] = []
        for family in CounterFamily.allCases {
            let declared = family.declaration
            for value in declared.values {
                rows.append(.init(.counter, declared.name, declared.help, [(declared.label, value)]) { family.read($0, value) })
            }
        }
        for counter in Counter.allCases {
            let declared = counter.declaration
            rows.append(.init(declared.kind, declared.name, declared.help, declared.labels) { counter.read($0) })
        }
        rows += [
            .init(.counter, "larder_retry_budget_exhausted_total", "Retries refused because the retry budget was spent.") {
                $0.upstream.retryBudgetExhausted
            },
            .init(.gauge, "larder_cache_bytes", "Bytes held by a cache tier.", [("tier", "memory")]) { $0.memory.bytes },
            .init(.gauge, "larder_cache_entries", "Entries held by a cache tier.", [("tier", "memory")]) { $0.memory.entries },
            .init(
                .counter, "larder_cache_evictions_total", "Entries evicted from a cache tier to stay within its size.", [("tier", "memory")]
            ) {
                $0.memory.evictions
            },
            .init(.gauge, "larder_cache_bytes", "Bytes held by a cache tier.", [("tier", "disk")]) { $0.disk?.bytes ?? 0 },
            .init(.gauge, "larder_cache_entries", "Entries held by a cache tier.", [("tier", "disk")]) { $0.disk?.entries ?? 0 },
            .init(
                .counter, "larder_cache_evictions_total", "Entries evicted from a cache tier to stay within its size.", [("tier", "disk")]
            ) {
                $0.disk?.evictions ?? 0
            },
            .init(
                .counter, "larder_cache_admissions_deferred_total",
                "Storable responses not stored until a second request (cache.admission = \"second_request\")."
            ) {
                $0.admissionsDeferred ?? 0
            },
            .init(.gauge, "larder_memory_files", "Anonymous memory files holding large memory-tier bodies (one descriptor each).") {
                $0.memory.files
            },
            .init(.counter, "larder_disk_corruptions_total", "Disk entries found damaged (size, checksum, head) and deleted.") {
                $0.disk?.corruptions ?? 0
            },
            .init(.counter, "larder_disk_write_errors_total", "Disk writes that failed (ENOSPC, EIO, permissions).") {
                $0.disk?.writeErrors ?? 0
            },
            .init(
                .counter, "larder_disk_scrubbed_bytes_total",
                "Bytes of disk entries over 1 MiB checked by the background scrub (disk.scrub_rate)."
            ) {
                $0.disk?.scrubbedBytes ?? 0
            },
            .init(.gauge, "larder_disk_degraded", "1 while the disk tier refuses writes after an error, or could not be set up.") {
                $0.disk?.degraded ?? true ? 1 : 0
            },
            .init(.gauge, "larder_workers", "Event loops serving (proxy.workers).") { $0.workers },
            .init(.counter, "larder_tls_certificates_minted_total", "Certificates the local CA minted for intercepted hosts.") {
                $0.tls.certificatesMinted
            },
            .init(
                .counter, "larder_tls_certificate_cache_hits_total", "Intercepted handshakes that reused a certificate minted before."
            ) {
                $0.tls.certificateCacheHits
            },
            .init(
                .gauge, "larder_tls_spliced_hosts",
                "Intercepted hosts tunnelled blind now for at least one client (tls.splice_after_failures)."
            ) {
                $0.tls.splicedHosts
            },
        ]
        return rows
    }()
}

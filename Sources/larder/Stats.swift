import ArgumentParser
import FoundationEssentials
import LarderServer

/// `larder stats`: the daemon's counters as a readable table.
struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running daemon's counters.",
        usage: "larder stats [<options>]",
        discussion: """
            Reads GET /stats from the admin listener.
            Examples:
              larder stats
              larder stats --admin 127.0.0.1:3129
              larder stats --json
            """)

    @OptionGroup var options: AdminOptions

    @Flag(help: "Print the raw JSON document.")
    var json = false

    func run() throws {
        let (address, body) = try options.get("/stats")
        if json {
            print(String(decoding: body, as: UTF8.self), terminator: "")
            return
        }
        let stats: StatsDocument
        do {
            stats = try StatsDocument.decode(body)
        } catch {
            throw ValidationError("GET /stats did not return a stats document this larder reads (\(error)); --json prints it as sent")
        }
        print(Self.table(stats, address: address.description))
    }

    /// How many clients a host is spliced for (`larder tls` lists them).
    static func spliced(_ host: StatsDocument.TLSHost) -> String {
        guard host.spliced else { return "" }
        guard let clients = host.splicedClients else { return " (spliced)" }
        return " (spliced for \(clients) client\(clients == 1 ? "" : "s"); larder tls)"
    }

    static func table(_ stats: StatsDocument, address: String) -> String {
        func pad(_ text: String) -> String { Text.padded(text, to: 14) }
        func bytes(_ count: Int) -> String { Format.bytes(Double(count)) }
        let requests = stats.requests
        var lines: [String] = []
        lines.append(
            "Larder \(stats.version) at \(address), up \(Format.duration(stats.uptimeSeconds)), \(stats.workers) event loop\(stats.workers == 1 ? "" : "s")"
        )
        // The admin listener's own calls (this command's among them) are counted apart from the
        // proxy's requests, which are what an operator reads the line for.
        let admin = requests["admin"] ?? 0
        lines.append(
            pad("Requests") + "\(Format.count((requests["total"] ?? 0) - admin)) through the proxy   hit ratio "
                + "\(Text.oneDecimal(stats.hitRatio * 100)) %   (and \(Format.count(admin)) admin call\(admin == 1 ? "" : "s"))")
        let outcomes = ["hit", "disk_hit", "revalidated", "stale", "coalesced", "miss", "error", "tunnel", "intercept"]
        lines.append(pad("") + outcomes.map { "\($0) \(Format.count(requests[$0] ?? 0))" }.joined(separator: "  "))
        lines.append(pad("Bytes") + "from cache \(bytes(stats.bytes.fromCache))   from upstream \(bytes(stats.bytes.fromUpstream))")
        let memory = stats.memory
        lines.append(
            pad("Memory") + "\(Format.count(memory.entries)) entries   \(bytes(memory.bytes)) of \(bytes(memory.maxBytes))   "
                + "\(Format.count(memory.evictions)) evicted")
        if let disk = stats.disk {
            lines.append(
                pad("Disk") + "\(Format.count(disk.entries)) entries   \(bytes(disk.bytes)) of \(bytes(disk.maxBytes))   "
                    + "\(Format.count(disk.evictions)) evicted   \(disk.corruptions) corrupt   \(disk.writeErrors) write errors"
                    + (disk.degraded ? "   DEGRADED (memory only)" : "") + (disk.indexComplete ? "" : "   (index rebuilding)"))
        } else {
            lines.append(pad("Disk") + "off")
        }
        let coalescing = stats.coalescing
        lines.append(
            pad("Coalescing") + "\(Format.count(coalescing.fills)) fetches   \(Format.count(coalescing.coalesced)) shared   "
                + "\(coalescing.moved) moved   \(coalescing.released) released   \(coalescing.timedOut) timed out")
        let upstream = stats.upstream
        lines.append(
            pad("Upstream") + "\(Format.count(upstream.requests)) requests   \(Format.count(upstream.retriesTotal)) retries   "
                + "\(Format.count(upstream.failures.values.reduce(0, +))) failures   \(upstream.retryBudgetExhausted) over budget")
        let connections = stats.connections
        lines.append(
            pad("Connections") + "\(connections.active) open   \(Format.count(connections.accepted)) accepted   "
                + "\(Format.count(connections.rejected)) refused")
        let tls = stats.tls
        if tls.intercepting || tls.handshakes.values.contains(where: { $0 > 0 }) {
            let requestsInside = tls.requests.values.reduce(0, +)
            let hits = (tls.requests["hit"] ?? 0) + (tls.requests["disk_hit"] ?? 0)
            lines.append(
                pad("HTTPS") + "\(Format.count(requestsInside)) requests inside   \(Format.count(hits)) hits   "
                    + "handshakes "
                    + Statistics.HandshakeOutcome.allCases.map { "\($0.rawValue) \(Format.count(tls.handshakes[$0.rawValue] ?? 0))" }
                    .joined(separator: "  "))
            lines.append(
                pad("") + "\(Format.count(tls.certificatesMinted)) certificates minted   \(tls.splicedHosts) hosts spliced   "
                    + "bodies by \(tls.bodyPath)")
            for host in tls.failingHosts.prefix(5) {
                lines.append(
                    pad("") + "\(host.host): \(host.failures) failed handshakes\(Self.spliced(host)): \(host.lastFailure)")
            }
        }
        if !stats.topHosts.isEmpty {
            lines.append(pad("Top hosts") + "requests  from cache  bytes")
            for host in stats.topHosts {
                let share = host.requests > 0 ? host.hits * 100 / host.requests : 0
                lines.append(
                    pad("") + "\(Format.count(host.requests).leftPadded(8))  \(String(share).leftPadded(8)) %  "
                        + "\(bytes(host.bytes).leftPadded(10))  \(host.host)")
            }
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

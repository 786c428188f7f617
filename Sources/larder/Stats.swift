import ArgumentParser
import Foundation

/// `larder stats`: the daemon's counters as a readable table.
struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running daemon's counters.",
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
        let address = try options.adminAddress()
        let response = try BlockingHTTPClient(address: address, timeoutSeconds: 10).request("GET", "/stats", headers: [("Host", address.description)])
        guard response.status == 200 else { throw ValidationError("GET /stats answered \(response.status): \(response.text)") }
        if json {
            print(response.text, terminator: "")
            return
        }
        guard let stats = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw ValidationError("GET /stats did not return a JSON object")
        }
        print(Self.table(stats, address: address.description))
    }

    static func table(_ stats: [String: Any], address: String) -> String {
        func dictionary(_ key: String, in source: [String: Any]? = nil) -> [String: Any] {
            ((source ?? stats)[key] as? [String: Any]) ?? [:]
        }
        func int(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? 0 }
        func double(_ value: Any?) -> Double { (value as? NSNumber)?.doubleValue ?? 0 }
        func pad(_ text: String) -> String { text.padding(toLength: 14, withPad: " ", startingAt: 0) }
        let requests = dictionary("requests")
        let bytes = dictionary("bytes")
        let memory = dictionary("memory")
        let coalescing = dictionary("coalescing")
        let upstream = dictionary("upstream")
        let connections = dictionary("connections")
        var lines: [String] = []
        lines.append("Larder \(stats["version"] as? String ?? "?") at \(address), up \(Format.duration(double(stats["uptime_seconds"])))")
        lines.append(pad("Requests") + "\(Format.count(int(requests["total"])))   hit ratio \(String(format: "%.1f", double(stats["hit_ratio"]) * 100)) %")
        let outcomes = ["hit", "disk_hit", "revalidated", "stale", "coalesced", "miss", "pass", "error", "tunnel", "admin"]
        lines.append(pad("") + outcomes.map { "\($0) \(Format.count(int(requests[$0])))" }.joined(separator: "  "))
        lines.append(pad("Bytes") + "from cache \(Format.bytes(double(bytes["from_cache"])))   from upstream \(Format.bytes(double(bytes["from_upstream"])))")
        lines.append(
            pad("Memory") + "\(Format.count(int(memory["entries"]))) entries   \(Format.bytes(double(memory["bytes"]))) of "
                + "\(Format.bytes(double(memory["max_bytes"])))   \(Format.count(int(memory["evictions"]))) evicted")
        if let disk = stats["disk"] as? [String: Any] {
            lines.append(
                pad("Disk") + "\(Format.count(int(disk["entries"]))) entries   \(Format.bytes(double(disk["bytes"]))) of "
                    + "\(Format.bytes(double(disk["max_bytes"])))   \(Format.count(int(disk["evictions"]))) evicted   "
                    + "\(int(disk["corruptions"])) corrupt   \(int(disk["write_errors"])) write errors"
                    + ((disk["degraded"] as? Bool) == true ? "   DEGRADED (memory only)" : "")
                    + ((disk["index_complete"] as? Bool) == false ? "   (index rebuilding)" : ""))
        } else {
            lines.append(pad("Disk") + "off")
        }
        lines.append(
            pad("Coalescing") + "\(Format.count(int(coalescing["fills"]))) fetches   \(Format.count(int(coalescing["coalesced"]))) shared   "
                + "\(int(coalescing["released"])) released   \(int(coalescing["timed_out"])) timed out")
        let failures = dictionary("failures", in: upstream).values.reduce(0) { $0 + int($1) }
        lines.append(
            pad("Upstream") + "\(Format.count(int(upstream["requests"]))) requests   \(Format.count(int(upstream["retries_total"]))) retries   "
                + "\(Format.count(failures)) failures   \(int(upstream["retry_budget_exhausted"])) over budget")
        lines.append(
            pad("Connections") + "\(int(connections["active"])) open   \(Format.count(int(connections["accepted"]))) accepted   "
                + "\(Format.count(int(connections["rejected"]))) refused")
        if let hosts = stats["top_hosts"] as? [[String: Any]], !hosts.isEmpty {
            lines.append(pad("Top hosts") + "requests  from cache  bytes")
            for host in hosts {
                let requests = int(host["requests"])
                let share = requests > 0 ? int(host["hits"]) * 100 / requests : 0
                lines.append(
                    pad("") + "\(Format.count(requests).leftPadded(8))  \(String(share).leftPadded(8)) %  "
                        + "\(Format.bytes(double(host["bytes"])).leftPadded(10))  \(host["host"] as? String ?? "?")")
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

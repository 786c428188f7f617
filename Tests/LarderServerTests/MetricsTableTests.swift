import Foundation
import LarderIO
import LarderUpstream
import Testing

@testable import LarderServer

/// One declaration per metric: every row reads its own field of the `/stats` document, and
/// the document `larder stats` decodes is the one the daemon encodes.
@Suite(.timeLimit(.minutes(1))) struct MetricsTableTests {
    /// A document whose every number differs, so a row reading the wrong field shows.
    static func distinctDocument() -> StatsDocument {
        var next = 0
        func n() -> Int {
            next += 1
            return next
        }
        var requests: [String: Int] = [:]
        for outcome in RequestOutcome.allCases { requests[outcome.rawValue] = n() }
        requests["total"] = n()
        return StatsDocument(
            version: "0.1.0", uptimeSeconds: 12.5, workers: n(), requests: requests, hitRatio: 0.25,
            bytes: .init(fromCache: n(), fromUpstream: n()),
            memory: .init(entries: n(), bytes: n(), maxBytes: n(), evictions: n(), files: n()),
            disk: .init(
                entries: n(), bytes: n(), maxBytes: n(), evictions: n(), corruptions: n(), writeErrors: n(), degraded: true,
                indexComplete: false, path: "/var/cache/larder", scrubbedBytes: n()),
            coalescing: .init(fills: n(), coalesced: n(), moved: n(), released: n(), timedOut: n()),
            upstream: .init(
                requests: n(), retries: Dictionary(uniqueKeysWithValues: RetryPolicy.Reason.allCases.map { ($0.rawValue, n()) }),
                retriesTotal: n(), failures: Dictionary(uniqueKeysWithValues: Statistics.failureReasons.map { ($0, n()) }),
                retryBudgetExhausted: n(), revalidated: n(), staleIfError: n(), backgroundRefreshes: n(), deadConnectionRetries: n(),
                idleConnectionsClosed: Dictionary(uniqueKeysWithValues: IdleConnectionClose.allCases.map { ($0.rawValue, n()) }),
                errors: n(), shareWaits: n(), slowClientCuts: n(), overShareCuts: n()),
            invalidations: n(),
            connections: .init(active: n(), accepted: n(), rejected: n(), evictedIdle: n(), admin: n(), takenForOthers: n()),
            refused: .init(badRequests: n(), destinations: n(), proxyAuth: n()),
            busyPoll: .init(caught: n(), expired: n()),
            tunnels: .init(opened: n(), bytesUp: n(), bytesDown: n()),
            parents: [.init(parent: "http://parent:3128", requests: n(), failures: n(), skipped: n(), down: false)],
            parentFailovers: n(),
            topHosts: [.init(host: "deb.example", requests: n(), hits: n(), bytes: n())],
            tls: .init(
                intercepting: true,
                handshakes: Dictionary(uniqueKeysWithValues: Statistics.HandshakeOutcome.allCases.map { ($0.rawValue, n()) }),
                certificatesMinted: n(), certificateCacheHits: n(),
                requests: Dictionary(uniqueKeysWithValues: RequestOutcome.proxied.map { ($0.rawValue, n()) }),
                splicedTunnels: n(), splicedHosts: n(), bodyPath: "copy", kernelSessions: n(),
                failingHosts: [.init(host: "pinned.example", failures: n(), lastFailure: "rejected: unknown ca", spliced: true)]),
            responses: Dictionary(uniqueKeysWithValues: Statistics.statusClassNames.map { ($0, n()) }),
            admissionsDeferred: n(), digestMismatches: n())
    }

    @Test func everySeriesIsDeclaredOnceAndReadsAFieldOfItsOwn() {
        let document = Self.distinctDocument()
        let rows = MetricsTable.rows
        let identities = rows.map { row in row.name + row.labels.map { "|\($0.0)=\($0.1)" }.joined() }
        #expect(Set(identities).count == rows.count, "a series is declared twice")
        let values = rows.map { $0.value(document) }
        // The two gauges for degraded (1) aside, every row reads a distinct, non-zero field.
        let numbered = zip(rows, values).filter { $0.0.name != "larder_disk_degraded" }.map(\.1)
        #expect(!numbered.contains(0), "a row reads nothing: \(zip(identities, values).filter { $0.1 == 0 }.map(\.0))")
        #expect(Set(numbered).count == numbered.count, "two rows read the same field")
        for row in rows {
            #expect(row.name.hasPrefix("larder_"))
            #expect((row.kind == .counter) == row.name.hasSuffix("_total"), "\(row.name)")
        }
    }

    /// Every counter ``Statistics`` holds, found by walking its stored properties (arrays and
    /// dictionaries of counters included), moves a `/metrics` row when it is counted: a counter
    /// added to Statistics and left out of the document or the table fails here.
    @Test func everyCounterOfTheStatisticsIsExported() {
        let stats = Statistics()
        var counters: [(String, AtomicCounter)] = []
        for child in Mirror(reflecting: stats).children {
            let name = child.label ?? "?"
            if let counter = child.value as? AtomicCounter {
                counters.append((name, counter))
            } else if let list = child.value as? [AtomicCounter] {
                counters += list.enumerated().map { ("\(name)[\($0.offset)]", $0.element) }
            } else if let table = child.value as? [String: AtomicCounter] {
                counters += table.map { ("\(name)[\($0.key)]", $0.value) }
            }
        }
        #expect(counters.count > 60, "the walk found the counters: \(counters.count)")
        func values() -> [Int] { MetricsTable.rows.map { $0.value(StatsDocument(counters: stats)) } }
        var before = values()
        for (name, counter) in counters {
            counter.add(1)
            let after = values()
            let moved = after != before
            #expect(moved, "\(name) is counted but no /metrics series shows it")
            before = after
        }
    }

    /// Each ``Counter`` moves exactly the `/metrics` row it declares, and reads back from the
    /// `/stats` field it declares.
    @Test func eachCounterMovesTheSeriesAndFieldItDeclares() {
        let rows = MetricsTable.rows
        for counter in Counter.allCases {
            let stats = Statistics()
            let before = rows.map { $0.value(StatsDocument(counters: stats)) }
            stats[counter].add(7)
            let document = StatsDocument(counters: stats)
            let after = rows.map { $0.value(document) }
            let moved = rows.indices.filter { before[$0] != after[$0] }
            let declared = counter.declaration
            #expect(moved.count == 1, "\(counter) moves \(moved.count) rows")
            #expect(
                moved.allSatisfy { rows[$0].name == declared.name && rows[$0].labels.elementsEqual(declared.labels, by: ==) },
                "\(counter) moves another series: \(moved.map { rows[$0].name })")
            #expect(counter.read(document) == 7, "\(counter)")
        }
    }

    /// Each counter of each ``CounterFamily`` moves exactly the `/metrics` row of its label
    /// value, and reads back from the `/stats` field the family declares.
    @Test func eachFamilyCounterMovesTheSeriesAndFieldItDeclares() {
        let rows = MetricsTable.rows
        for family in CounterFamily.allCases {
            let declared = family.declaration
            #expect(Statistics().counters(family).count == declared.values.count, "\(family)")
            for (index, value) in declared.values.enumerated() {
                let stats = Statistics()
                let before = rows.map { $0.value(StatsDocument(counters: stats)) }
                stats.counters(family)[index].add(7)
                let document = StatsDocument(counters: stats)
                let after = rows.map { $0.value(document) }
                let moved = rows.indices.filter { before[$0] != after[$0] }
                #expect(moved.count == 1, "\(family) \(value) moves \(moved.count) rows")
                #expect(
                    moved.allSatisfy { rows[$0].name == declared.name && rows[$0].labels.elementsEqual([(declared.label, value)], by: ==) },
                    "\(family) \(value) moves another series: \(moved.map { rows[$0].name })")
                #expect(family.read(document, value) == 7, "\(family) \(value)")
            }
        }
    }

    /// The counting calls land on the family counter of their label: an outcome on its own
    /// value (the index written out in ``Statistics`` follows `allCases`).
    @Test func countingAnOutcomeMovesItsOwnLabel() {
        for outcome in RequestOutcome.allCases {
            let stats = Statistics()
            stats.count(outcome)
            #expect(CounterFamily.requests.read(StatsDocument(counters: stats), outcome.rawValue) == 1, "\(outcome)")
            #expect(StatsDocument(counters: stats).requests["total"] == 1)
        }
        for outcome in RequestOutcome.proxied {
            let stats = Statistics()
            stats.countIntercepted(outcome)
            #expect(CounterFamily.tlsRequests.read(StatsDocument(counters: stats), outcome.rawValue) == 1, "\(outcome)")
        }
        for handshake in Statistics.HandshakeOutcome.allCases {
            let stats = Statistics()
            stats.count(handshake)
            #expect(CounterFamily.tlsHandshakes.read(StatsDocument(counters: stats), handshake.rawValue) == 1, "\(handshake)")
        }
    }

    /// README.md's metric list names every series of the table.
    @Test func theReadmeNamesEverySeries() throws {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        let readme = try String(contentsOfFile: parts.joined(separator: "/") + "/README.md", encoding: .utf8)
        let listed = Set(
            readme.split(separator: "\n").filter { $0.hasPrefix("| `larder_") }.flatMap { line in
                line.split(separator: "`").filter { $0.hasPrefix("larder_") }.map { String($0.prefix { $0 != "{" }) }
            })
        let missing = Set(MetricsTable.rows.map(\.name)).subtracting(listed)
        #expect(listed.count > 40, "the list was read: \(listed.count)")
        #expect(missing.isEmpty, "series README.md does not list: \(missing.sorted())")
    }

    /// The outcomes counted apart inside TLS sessions are the proxied ones, each its own counter.
    @Test func interceptedRequestsAreCountedByProxiedOutcome() {
        let stats = Statistics()
        for (offset, outcome) in RequestOutcome.proxied.enumerated() {
            for _ in 0...offset { stats.countIntercepted(outcome) }
        }
        stats.countIntercepted(.admin)
        let document = StatsDocument(counters: stats)
        #expect(
            document.tls.requests == Dictionary(uniqueKeysWithValues: RequestOutcome.proxied.enumerated().map { ($1.rawValue, $0 + 1) }))
        #expect(stats.interceptedValue(.admin) == 0)
        #expect(Set(RequestOutcome.fromCache).isSubset(of: RequestOutcome.proxied))
    }

    @Test func theDocumentDecodesAsItWasEncodedWithSnakeCaseKeys() throws {
        let document = Self.distinctDocument()
        let json = try document.json()
        #expect(try StatsDocument.decode(json) == document)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
        for key in ["uptime_seconds", "hit_ratio", "busy_poll", "top_hosts", "parent_failovers", "connections", "tls"] {
            #expect(object[key] != nil, "\(key)")
        }
        let connections = try #require(object["connections"] as? [String: Any])
        #expect(connections["evicted_idle"] as? Int == document.connections.evictedIdle)
        let tls = try #require(object["tls"] as? [String: Any])
        #expect(tls["certificates_minted"] as? Int == document.tls.certificatesMinted)
        #expect((tls["failing_hosts"] as? [[String: Any]])?.first?["last_failure"] as? String == "rejected: unknown ca")
        var memoryOnly = document
        memoryOnly.disk = nil
        let text = String(decoding: try memoryOnly.json(), as: UTF8.self)
        #expect(text.contains("\"disk\":null"), "no disk tier is null, not absent")
        #expect(try StatsDocument.decode(try memoryOnly.json()) == memoryOnly)
    }
}

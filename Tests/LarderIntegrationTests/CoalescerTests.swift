import Foundation
import Glibc
import Testing

/// Starts `count` curl processes at once and collects what each saw.
private struct ParallelCurl {
    struct Outcome {
        let exitCode: Int32
        let startTransfer: Double
        let total: Double
        let body: Data
        let requestNumber: String?
    }

    static func run(_ count: Int, proxy: String, url: (Int) -> String, extra: (Int) -> [String] = { _ in [] }) throws -> [Outcome] {
        let directory = Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var children: [ChildProcess] = []
        for index in 0..<count {
            children.append(
                try ChildProcess(
                    "/usr/bin/curl",
                    [
                        "-s", "--max-time", "60", "--proxy", proxy, "-o", "\(directory)/\(index)", "-D", "\(directory)/\(index).h",
                        "-w", "%{time_starttransfer} %{time_total}",
                    ] + extra(index) + [url(index)]))
        }
        return children.enumerated().map { index, child in
            child.process.waitUntilExit()
            let times = child.stdout.split(separator: " ").compactMap { Double($0) }
            let headers = (try? String(contentsOfFile: "\(directory)/\(index).h", encoding: .utf8)) ?? ""
            let number = headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-request-number:") }
                .map { String($0.split(separator: ":")[1]).trimmingCharacters(in: .whitespaces) }
            return Outcome(
                exitCode: child.process.terminationStatus, startTransfer: times.first ?? 0, total: times.last ?? 0,
                body: FileManager.default.contents(atPath: "\(directory)/\(index)") ?? Data(), requestNumber: number)
        }
    }
}

extension IntegrationTests {
    /// One upstream fill per key, streamed to every waiting client.
    @Suite(.timeLimit(.minutes(3))) struct Coalescer {
        /// A request after an operator's purge does not join the fill that began before it
        /// (that fill fetches what was purged, for its own readers): it gets the origin's
        /// current version. One loop, so that the request would meet that fill.
        @Test func aRequestAfterAPurgeDoesNotJoinTheFillFromBeforeIt() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n")
            let target = "/late?size=\(2 << 20)&ranges=1&cc=max-age=600&slow=0.05"
            let url = origin.url(target)
            let first = try ChildProcess(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "60", "-x", larder.proxy, url])
            defer { first.kill() }
            // The fill's head is in and its body streams (a fill with no head yet takes no readers).
            for _ in 0..<200 {
                if try origin.bytes(target) >= 256 << 10 { break }
                usleep(10_000)
            }
            try origin.bump("/late")
            let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url
            _ = try Curl.run(["-X", "POST", "http://127.0.0.1:\(larder.adminPort)/purge?url=\(encoded)"])
            let late = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            let current = try Curl.run([url], timeout: 60)
            #expect(late.status == 200 && late.header("cache-status")?.contains("collapsed") != true, "\(late.headers)")
            // Not `==` on the bodies: a failure would diff two 2 MiB values for many minutes.
            #expect(bodyMismatch(late.body, current.body) == nil, "the origin's current version, not the purged one")
            first.waitUntilExit()
            #expect(first.stdout == "200", "the client in flight is served")
        }

        /// With several event loops too: a request on another loop moves to the one fetching.
        /// Which loop accepts each connection is the kernel's choice (one listener, exclusive
        /// wake-ups): a burst can land on one loop alone, so with 4 loops the burst is repeated,
        /// on a new URL, until some request had to move (3 bursts at most).
        @Test(arguments: ["", "[proxy]\nworkers = 1\n", "[proxy]\nworkers = 4\n"])
        func twoHundredClientsShareOneOriginRequest(config: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: config)
            var moved: Int?
            for burst in 0..<(config.contains("workers = 4") ? 3 : 1) {
                let path = "/burst?delay=1&size=20000&cc=max-age=60&id=\(burst)"
                // Connect all clients first, then send every request at once.
                let connections = try (0..<200).map { _ in try RawConnection(port: larder.proxyPort, receiveTimeout: 10) }
                let request = "GET \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
                let start = Date()
                for connection in connections { connection.send(request) }
                var bodies = Set<Data>()
                for connection in connections {
                    let response = try connection.readResponse()
                    #expect(response.status == 200)
                    bodies.insert(Data(response.body))
                }
                let wall = Date().timeIntervalSince(start)
                print("200 coalesced clients done \(String(format: "%.3f", wall)) s after the burst (origin waits 1 s)")
                #expect(bodies.count == 1, "all 200 bodies are byte-identical")
                #expect(bodies.first == (try origin.directBody(path)))
                #expect(try origin.count(path) == 2, "one request through the proxy, one direct")
                let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
                moved = metrics.split(separator: "\n").first { $0.hasPrefix("larder_coalesce_moved_total ") }
                    .flatMap { Int($0.split(separator: " ").last ?? "") }
                if (moved ?? 0) > 0 { break }
            }
            if config.contains("workers = 4") {
                #expect((moved ?? 0) > 0, "200 connections spread over 4 loops: those off the fetching loop moved to it")
            } else if config.contains("workers = 1") {
                #expect(moved == 0)
            }
        }

        /// With two loops, requests that arrive while the fill ends (the origin holds the
        /// chunked body's end back for 0.4 s) join the fill, move to its loop, or find the
        /// stored response: the key is free only once the body is stored, so none fetches it
        /// again, and each gets the whole body. Requests are sent 12 ms apart on connections
        /// opened at once (which loop accepts each is the kernel's choice: the round is
        /// repeated, on a new URL and a new daemon, until some request had to move, 5 rounds
        /// at most).
        @Test func requestsOnEitherLoopAsTheFillEndsMakeOneOriginRequest() throws {
            let origin = try Origin()
            var moved = 0
            for round in 0..<5 {
                // A daemon of its own each round: which loop the kernel wakes for a connection
                // tends to stay the same for the life of one.
                let larder = try Larder(config: "[proxy]\nworkers = 2\n")
                let path = "/ending?size=20000&chunked=1&slow=0.4&cc=max-age=60&id=\(round)"
                // Opened from 8 threads at once, each connection asking for a stored response
                // first: a connection that arrives while one loop is busy wakes the other.
                let warm = origin.url("/warm?size=100000&cc=max-age=60")
                _ = try Curl.viaProxy(larder.proxy, [warm])
                let opened = OpenedConnections()
                let port = larder.proxyPort
                let warmRequest = "GET \(warm) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
                DispatchQueue.concurrentPerform(iterations: 8) { _ in
                    for _ in 0..<8 {
                        guard let connection = try? RawConnection(port: port, receiveTimeout: 10) else { continue }
                        connection.send(warmRequest)
                        if (try? connection.readResponse())?.status == 200 { opened.add(connection) }
                    }
                }
                let connections = opened.all
                #expect(connections.count == 64)
                let request = "GET \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
                for connection in connections {
                    connection.send(request)
                    usleep(12_000)
                }
                var statuses: [String] = []
                var bodies = Set<Data>()
                for connection in connections {
                    let response = try connection.readResponse()
                    #expect(response.status == 200)
                    bodies.insert(Data(response.body))
                    statuses.append(response.header("cache-status") ?? "-")
                }
                #expect(try origin.count(path) == 1, "one origin request: \(statuses)")
                #expect(bodies == [try origin.directBody(path)], "every client got the whole body")
                let after = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(after.header("cache-status")?.hasPrefix("larder; hit") == true, "\(after.headers)")
                #expect(after.body == (try origin.directBody(path)))
                moved = try SharedKeys.metric(larder, "larder_coalesce_moved_total") ?? 0
                let kinds = Dictionary(grouping: statuses) { $0.split(separator: ";").dropFirst().first.map(String.init) ?? $0 }
                print("round \(round): \(kinds.mapValues(\.count)), \(moved) moved so far")
                if moved > 0 { break }
            }
            #expect(moved > 0, "some request arrived on the loop that was not fetching")
        }

        @Test func waitersReceiveTheBodyWhileItArrives() throws {
            let origin = try Origin()
            let larder = try Larder()
            // 20 MiB at 64 KiB every 10 ms: the origin takes about 3 s to send it all.
            let path = "/stream?size=20971520&slow=0.01&cc=max-age=60"
            let outcomes = try ParallelCurl.run(8, proxy: larder.proxy, url: { _ in origin.url(path) })
            let firstBytes = outcomes.map(\.startTransfer).max() ?? 0
            let earliestEnd = outcomes.map(\.total).min() ?? 0
            #expect(outcomes.allSatisfy { $0.exitCode == 0 && $0.body.count == 20_971_520 })
            #expect(firstBytes < earliestEnd / 2, "every waiter had bytes long before the fill finished (\(firstBytes) vs \(earliestEnd))")
            #expect(try origin.count(path) == 1)
        }

        @Test func aStalledClientDoesNotDelayTheOthers() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/stall?size=8388608&slow=0.005&cc=max-age=60"
            // A client that asks and then reads nothing.
            let stalled = try RawConnection(port: larder.proxyPort, receiveTimeout: 30)
            stalled.send("GET \(origin.url(path)) HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(100_000)
            let others = try ParallelCurl.run(4, proxy: larder.proxy, url: { _ in origin.url(path) })
            // They finished while the stalled client has not read a byte.
            #expect(others.allSatisfy { $0.exitCode == 0 && $0.body.count == 8_388_608 })
            // The stalled client still gets every byte, from the disk file behind the fill.
            let response = try stalled.readResponse()
            #expect(response.body.count == 8_388_608)
            #expect(bodyMismatch(Data(response.body), others[0].body) == nil)
            #expect(try origin.count(path) == 1)
        }

        /// Review 76 F1: a response no shared cache could reuse (no freshness: no Cache-Control,
        /// Expires or Last-Modified; `max-age=0`) still went to every request that joined its
        /// fill, so a page an origin personalised by Cookie, saying nothing of caching, went
        /// from one user to the others. Review 77 F2: nor one stale on arrival (its Age past its
        /// max-age, RFC 9111 §4.2.3).
        @Test(arguments: [
            "cc=private,max-age=60", "cc=max-age=60&h=Set-Cookie:session=1", "cc=no-store", "no-cache-headers=1", "cc=max-age=0",
            "cc=max-age=60&h=Age:600", "cc=stale-while-revalidate=600", "cc=max-age=0,stale-while-revalidate=600",
        ])
        func responsesThatMayNotBeSharedAreNotShared(_ query: String) throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/mine?delay=0.5&\(query)"
            let outcomes = try ParallelCurl.run(5, proxy: larder.proxy, url: { _ in origin.url(path) })
            #expect(outcomes.allSatisfy { $0.exitCode == 0 })
            #expect(Set(outcomes.compactMap(\.requestNumber)).count == 5, "each client got its own origin response")
            #expect(try origin.count(path) == 5)
            // Meanwhile the URL is fetched without coalescing (no queueing behind an unusable fill).
            let again = try ParallelCurl.run(3, proxy: larder.proxy, url: { _ in origin.url(path) })
            #expect(Set(again.compactMap(\.requestNumber)).count == 3)
        }

        /// Review 76 F1, its recipe: Bob joined Alice's request for a page the origin made for
        /// her cookie and sent without a word on caching, and got her page (`collapsed`).
        @Test func aPageNoCacheCouldReuseGoesOnlyToItsOwnClient() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/account"
            let answers = [Scripted(body: "alice's account", delay: 1.5), Scripted(body: "bob's account")]
            try origin.script(path, answers, conditional: false)
            let url = origin.url(path)
            let alice = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "20", "--proxy", larder.proxy, "-H", "Cookie: session=alice", url])
            usleep(300_000)
            let bob = try Curl.viaProxy(larder.proxy, ["-H", "Cookie: session=bob", url])
            alice.process.waitUntilExit()
            #expect(alice.stdout == "alice's account")
            #expect(bob.text == "bob's account", "\(bob.text) \(bob.header("cache-status") ?? "-")")
            #expect(bob.header("cache-status")?.contains("collapsed") == false)
            #expect(try origin.count(path) == 2)
        }

        /// The answer decides whether it is shared, not the request the fill was made for: a
        /// client's `no-store` (its own business, RFC 9111 §5.2.1.5) must not turn coalescing off
        /// for the others. A `network_only` route shares nothing.
        @Test(arguments: ["", "[cache]\ndefault_policy = \"network_only\"\n"])
        func aRequestsNoStoreLeavesTheAnswerShared(config: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: config)
            let path = "/popular?delay=1&cc=max-age=60"
            let first = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "20", "--proxy", larder.proxy, "-H", "Cache-Control: no-store", origin.url(path)])
            usleep(300_000)
            let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            first.process.waitUntilExit()
            #expect(second.status == 200)
            #expect(try origin.count(path) == (config.isEmpty ? 1 : 2), "\(second.header("cache-status") ?? "-")")
        }

        /// Review 77 F1: a 304 was always shared and always merged into the stored entry: one
        /// that was one client's (a Set-Cookie, `private`) gave that client's fields to everyone
        /// who joined the revalidation, and kept them in the entry for the clients after; and
        /// the client it answered never got its own cookie. One client's for its cookie alone,
        /// its freshness still refreshes the entry for everyone (review 78 N2: otherwise every
        /// request revalidated again), and the entry so refreshed answers the requests that
        /// joined it (review 79 A3: each went to the origin for its own).
        @Test func aCookiesRevalidationAnswersItsClientAloneAndLeavesTheEntry() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/session"
            let fields = [("Cache-Control", "max-age=1"), ("ETag", "\"v1\"")]
            let answers = [
                Scripted(headers: fields, body: "page"),
                Scripted(
                    status: 304,
                    headers: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("Set-Cookie", "s=alice"), ("X-User", "alice")],
                    body: "", delay: 1.5),
                Scripted(status: 304, headers: fields, body: ""),
            ]
            try origin.script(path, answers, conditional: false)
            let url = origin.url(path)
            #expect(try Curl.viaProxy(larder.proxy, [url]).text == "page")
            sleep(2)
            let alice = try ChildProcess(
                "/usr/bin/curl", ["-s", "-D", "-", "--max-time", "20", "--proxy", larder.proxy, "-H", "Cookie: s=old", url])
            usleep(300_000)
            let bob = try Curl.viaProxy(larder.proxy, [url])
            alice.process.waitUntilExit()
            #expect(alice.stdout.contains("Set-Cookie: s=alice") && alice.stdout.hasSuffix("page"), "\(alice.stdout)")
            #expect(bob.status == 200 && bob.text == "page")
            #expect(bob.header("x-user") == nil && bob.header("set-cookie") == nil, "\(bob.header("cache-status") ?? "-")")
            let later = try Curl.viaProxy(larder.proxy, [url])
            #expect(later.text == "page" && later.header("x-user") == nil, "the entry kept none of Alice's fields")
            #expect(later.cacheStatus?.hit == true, "the validation's freshness holds for everyone")
            #expect(try origin.count(path) == 2, "stored, Alice's revalidation (Bob's answer too); the later one a hit")
        }

        /// Review 78 N1: a revalidation for a request with no-store was taken for one client's,
        /// and the URL was then fetched without coalescing for not_shareable_ttl: one request
        /// every 10 s turned the stampede protection off for everyone. Its 304 is shared (and
        /// the entry, which no-store forbids updating, stays as it was).
        @Test func aNoStoreRevalidationLeavesTheURLCoalesced() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/page?delay=1&cc=max-age=1&ranges=1"
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
            sleep(2)
            let first = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: no-cache, no-store", origin.url(path)])
            #expect(first.status == 200)
            let before = try origin.count(path)
            let outcomes = try ParallelCurl.run(4, proxy: larder.proxy, url: { _ in origin.url(path) })
            #expect(outcomes.allSatisfy { $0.exitCode == 0 })
            #expect(try origin.count(path) - before == 1, "the four share one revalidation")
        }

        @Test func requestsWithAuthorizationAreNotShared() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/auth?delay=0.5&cc=max-age=60"
            let outcomes = try ParallelCurl.run(
                3, proxy: larder.proxy, url: { _ in origin.url(path) }, extra: { ["-H", "Authorization: Bearer user\($0)"] })
            #expect(Set(outcomes.compactMap(\.requestNumber)).count == 3)
            #expect(try origin.count(path) == 3)
        }

        @Test func waiterWithAnotherVariantGoesUpstreamItself() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/vary?delay=0.5&cc=max-age=60&h=Vary:Accept-Language"
            let outcomes = try ParallelCurl.run(
                4, proxy: larder.proxy, url: { _ in origin.url(path) }, extra: { ["-H", "Accept-Language: \($0 % 2 == 0 ? "en" : "fr")"] })
            #expect(outcomes.allSatisfy { $0.exitCode == 0 })
            #expect(try origin.count(path) == 2, "one fill per variant")
        }

        /// Review 72 F1: a revalidation whose origin erred answered every reader from its
        /// stale copy, a reader that joined it by URL asking for another variant too (Vary:
        /// Cookie: one user's page to another). Such a reader asks for its own.
        @Test func aStaleCopyStandingInForAnErrorGoesOnlyToItsVariant() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[retry]\nstrategy = \"none\"\n")
            let path = "/page"
            let headers = [("Cache-Control", "max-age=1, stale-if-error=600"), ("Vary", "Cookie")]
            let answers = [
                Scripted(headers: headers, body: "alice's page"), Scripted(status: 503, headers: headers, body: "busy", delay: 1.5),
            ]
            try origin.script(path, answers, conditional: false)
            let url = origin.url(path)
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "Cookie: user=alice", url]).text == "alice's page")
            sleep(2)
            // Alice's revalidation goes upstream; Bob's request joins it while the origin thinks.
            let alice = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "20", "--proxy", larder.proxy, "-H", "Cookie: user=alice", url])
            usleep(500_000)
            let bob = try Curl.viaProxy(larder.proxy, ["-H", "Cookie: user=bob", url])
            alice.process.waitUntilExit()
            #expect(alice.stdout == "alice's page", "the stale copy answers its own variant")
            #expect(bob.text != "alice's page", "another variant's stale copy: \(bob.status) \(bob.text)")
            #expect(bob.status == 503 && bob.text == "busy", "its own request's answer: \(bob.status) \(bob.text)")
        }

        /// Review 73 N1 (HIGH): a fill's first reader was taken for the one it was made for and
        /// never checked against the response. A background refresh (stale-while-revalidate)
        /// has no reader of its own, so the first request joining it, for another user
        /// (Vary: Cookie), got the first user's page; likewise a request joining a fill whose
        /// client left before the head, for a private answer. Every joiner is checked.
        @Test(arguments: ["background refresh", "background refresh, a 304", "own client left"])
        func aJoinerIsCheckedThoughTheFillsOwnClientIsNotThere(shape: String) throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/mine")
            let swr = shape.hasPrefix("background")
            var headers = [("Cache-Control", swr ? "max-age=1, stale-while-revalidate=60" : "private"), ("Vary", "Cookie")]
            if shape.hasSuffix("304") { headers.append(("ETag", "\"a\"")) }
            // In order: Alice's (stored, then refreshed in the background, 2 s late; or the one
            // she leaves, 2 s late), then Bob's own.
            let alices = swr ? [Scripted(headers: headers, body: "alice's page")] : []
            let answers =
                alices + [Scripted(headers: headers, body: "alice's page again", delay: 2), Scripted(headers: headers, body: "bob's page")]
            try origin.script("/mine", answers, conditional: shape.hasSuffix("304"))
            if swr {
                #expect(try Curl.viaProxy(larder.proxy, ["-H", "Cookie: user=alice", url]).text == "alice's page")
                sleep(2)
                // Stale: answered at once, refreshed in the background (RFC 5861 §3).
                #expect(try Curl.viaProxy(larder.proxy, ["-H", "Cookie: user=alice", url]).text == "alice's page")
            } else {
                // Alice gives up before the head.
                _ = try Curl.viaProxy(larder.proxy, ["--max-time", "0.5", "-H", "Cookie: user=alice", url])
            }
            let bob = try Curl.viaProxy(larder.proxy, ["-H", "Cookie: user=bob", url])
            #expect(!bob.text.contains("alice"), "\(shape): \(bob.text)")
            #expect(bob.status == 200 && bob.text == "bob's page", "\(shape): \(bob.status) \(bob.text)")
        }

        @Test func dedupAlwaysSharesIdenticalPostsOnly() throws {
            let origin = try Origin()
            let larder = try Larder(
                config: """
                    [[route]]
                    match = "http://127.0.0.1:*/graphql*"
                    methods = ["POST"]
                    dedup = "always"
                    """)
            let same = try ParallelCurl.run(
                6, proxy: larder.proxy, url: { _ in origin.url("/graphql?delay=0.5&echo=1") },
                extra: { _ in ["--data-binary", "{\"query\":\"{ a }\"}"] })
            #expect(same.allSatisfy { $0.exitCode == 0 && $0.body == Data("{\"query\":\"{ a }\"}".utf8) })
            #expect(try origin.count("/graphql?delay=0.5&echo=1") == 1)
            let different = try ParallelCurl.run(
                4, proxy: larder.proxy, url: { _ in origin.url("/graphql2?delay=0.5&echo=1") },
                extra: { ["--data-binary", "{\"query\":\"{ b\($0) }\"}"] })
            #expect(different.enumerated().allSatisfy { $1.body == Data("{\"query\":\"{ b\($0) }\"}".utf8) })
            #expect(try origin.count("/graphql2?delay=0.5&echo=1") == 4)
            // Without the route, POSTs are never coalesced.
            let plain = try ParallelCurl.run(
                3, proxy: larder.proxy, url: { _ in origin.url("/other?delay=0.3&echo=1") }, extra: { _ in ["--data-binary", "x"] })
            #expect(plain.allSatisfy { $0.exitCode == 0 })
            #expect(try origin.count("/other?delay=0.3&echo=1") == 3)
        }

        @Test func cancellingOneWaiterLeavesTheOtherIntact() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/cancel?size=10485760&slow=0.01&cc=max-age=60"
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let survivor = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "60", "--proxy", larder.proxy, "-o", directory + "/survivor", origin.url(path)])
            let quitter = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "60", "--proxy", larder.proxy, "-o", "/dev/null", origin.url(path)])
            usleep(600_000)
            quitter.kill()
            survivor.process.waitUntilExit()
            #expect(survivor.process.terminationStatus == 0)
            let expected = try origin.directBody(path)
            #expect(FileManager.default.contents(atPath: directory + "/survivor") == expected)
            let served = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(served.header("cache-status")?.hasPrefix("larder; hit") == true)
            #expect(bodyMismatch(served.body, expected) == nil)
            #expect(try origin.count(path) == 2, "one fill through the proxy, one direct")
        }

        @Test func abandonedCacheableFillCompletesForTheNextClient() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/abandoned?size=2000000&slow=0.02&cc=max-age=60"
            let leaver = try ChildProcess("/usr/bin/curl", ["-s", "--proxy", larder.proxy, "-o", "/dev/null", origin.url(path)])
            usleep(200_000)
            leaver.kill()
            usleep(1_500_000)  // the origin needs about 0.6 s more for the rest of the body
            let next = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(next.header("cache-status")?.hasPrefix("larder; hit") == true)
            #expect(try bodyMismatch(next.body, origin.directBody(path)) == nil)
            #expect(try origin.count(path) == 2)
        }

        @Test func waiterGivesUpAfterTheWaitTimeout() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[coalesce]\nwait_timeout = \"300ms\"\n")
            let path = "/patience?delay=1.5&cc=max-age=60"
            let outcomes = try ParallelCurl.run(2, proxy: larder.proxy, url: { _ in origin.url(path) })
            #expect(outcomes.allSatisfy { $0.exitCode == 0 })
            #expect(try origin.count(path) == 2, "the waiter went upstream on its own")
        }

        @Test func waitersBeyondTheCapGoUpstreamThemselves() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[coalesce]\nmax_waiters = 2\n")
            let path = "/crowd?delay=0.5&cc=max-age=60"
            let outcomes = try ParallelCurl.run(6, proxy: larder.proxy, url: { _ in origin.url(path) })
            #expect(outcomes.allSatisfy { $0.exitCode == 0 })
            let count = try origin.count(path)
            #expect(count >= 3 && count <= 5, "fills of at most 2 clients: \(count) origin requests")
        }
    }
}

/// Connections opened on several threads, collected under a lock: each is handed over once and
/// used only by the test's thread afterwards (RawConnection is not Sendable).
private final class OpenedConnections: @unchecked Sendable {
    private let lock = NSLock()
    private var connections: [RawConnection] = []

    func add(_ connection: RawConnection) {
        lock.withLock { connections.append(connection) }
    }

    var all: [RawConnection] { lock.withLock { connections } }
}

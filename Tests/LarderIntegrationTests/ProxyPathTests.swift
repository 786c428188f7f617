import Foundation
import Testing

extension IntegrationTests {
    /// The core proxy path: misses, hits, keep-alive, pipelining, streaming, upstream failures.
    @Suite(.timeLimit(.minutes(3))) struct ProxyPath {
        @Test func missThenHitServesTheOriginsBytes() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/file?cc=max-age=60&size=5000"
            let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(first.status == 200)
            #expect(first.header("cache-status") == "larder; fwd=uri-miss; stored")
            #expect(second.cacheStatus?.isMemoryHit == true)
            #expect(second.header("age") != nil)
            #expect(first.header("via")?.contains("1.1 larder") == true)
            #expect(bodyMismatch(first.body, second.body) == nil)
            #expect(try bodyMismatch(first.body, origin.directBody(path)) == nil)
            #expect(try origin.count(path) == 2)  // one through the proxy, one direct
        }

        /// Bodies of 32 KiB and more move to an anonymous memory file on their first hit, and
        /// hits `sendfile` from it; until then (a response asked for once) they stay in the
        /// array they arrived in. The bytes, ranges and Cache-Status must be those of any memory
        /// hit, before and after the move, and a purge must give the file back.
        @Test func largeMemoryHitsComeFromAMemoryFileWithTheOriginsBytes() throws {
            let origin = try Origin()
            let larder = try Larder()
            let large = "/large?cc=max-age=60&size=200000"
            let small = "/small?cc=max-age=60&size=2000"
            let expected = try origin.directBody(large)
            #expect(try bodyMismatch(Curl.viaProxy(larder.proxy, [origin.url(large)]).body, expected) == nil)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(small)]).status == 200)
            #expect(try memoryFiles(of: larder) == 0, "a miss makes no memory file")
            #expect(try reportedMemoryFiles(larder) == 0)
            // The first hit, a range, is sent from the array; the full hit right after it from
            // the array or the file, whichever holds it by then.
            let firstRange = try Curl.viaProxy(larder.proxy, ["-r", "1000-69999", origin.url(large)])
            #expect(firstRange.status == 206)
            #expect(firstRange.cacheStatus?.isMemoryHit == true)
            #expect(bodyMismatch(firstRange.body, expected.subdata(in: 1000..<70000)) == nil)
            let hit = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(hit.cacheStatus?.isMemoryHit == true)
            #expect(bodyMismatch(hit.body, expected) == nil)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(small)]).cacheStatus?.isMemoryHit == true)
            // The move runs on the disk reader thread, after the hit.
            for _ in 0..<100 where try memoryFiles(of: larder) == 0 { usleep(20_000) }
            #expect(try memoryFiles(of: larder) == 1, "one memory file, for the large body only, once hit")
            #expect(try reportedMemoryFiles(larder) == 1)
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            let gauge = metrics.split(separator: "\n").first { $0.hasPrefix("larder_memory_files ") }
            #expect(gauge.flatMap { Double($0.split(separator: " ").last!) } == 1, "\(gauge ?? "no larder_memory_files")")
            let fromFile = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(fromFile.cacheStatus?.isMemoryHit == true)
            #expect(bodyMismatch(fromFile.body, expected) == nil)
            #expect(try memoryFiles(of: larder) == 1, "moved once")
            let range = try Curl.viaProxy(larder.proxy, ["-r", "70000-130099", origin.url(large)])
            #expect(range.status == 206)
            #expect(bodyMismatch(range.body, expected.subdata(in: 70000..<130100)) == nil)
            #expect(try origin.count(large) == 2)  // one through the proxy, one direct
            let purge = try ChildProcess(Paths.larder, ["purge", "--admin", "127.0.0.1:\(larder.adminPort)", origin.url(large)])
            purge.process.waitUntilExit()
            #expect(purge.process.terminationStatus == 0)
            #expect(try memoryFiles(of: larder) == 0, "the purge closed it")
            #expect(try reportedMemoryFiles(larder) == 0)
        }

        /// Bodies over 1 MiB move to a memory file too where the kernel's indirect calls are not
        /// retpolines (`sendfile`'s per-page work is then cheaper than a copy of the array), and
        /// stay arrays where they are or may be: whichever this host is, hits and ranges carry
        /// the origin's bytes.
        @Test func bodiesOver1MiBUseAMemoryFileUnlessTheKernelUsesRetpolines() throws {
            let origin = try Origin()
            let larder = try Larder()
            let large = "/over-1mib?cc=max-age=60&size=3000000"
            let expected = try origin.directBody(large)
            #expect(try bodyMismatch(Curl.viaProxy(larder.proxy, [origin.url(large)]).body, expected) == nil)
            let hit = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(hit.cacheStatus?.isMemoryHit == true)
            #expect(bodyMismatch(hit.body, expected) == nil)
            let mitigation = try? String(contentsOfFile: "/sys/devices/system/cpu/vulnerabilities/spectre_v2", encoding: .utf8)
            let line = mitigation.flatMap { $0.split(separator: "\n").first }?.lowercased()
            let expectFile = line.map { !$0.contains("retpoline") && !$0.contains("lfence") } ?? false
            if expectFile {
                for _ in 0..<100 where try memoryFiles(of: larder) == 0 { usleep(20_000) }
            } else {
                usleep(200_000)
            }
            #expect(try memoryFiles(of: larder) == (expectFile ? 1 : 0), "kernel: \(mitigation ?? "no spectre_v2 line")")
            for _ in 0..<2 {
                let again = try Curl.viaProxy(larder.proxy, [origin.url(large)])
                #expect(again.cacheStatus?.isMemoryHit == true)
                #expect(bodyMismatch(again.body, expected) == nil)
            }
            let range = try Curl.viaProxy(larder.proxy, ["-r", "1048000-2500000", origin.url(large)])
            #expect(range.status == 206)
            #expect(bodyMismatch(range.body, expected.subdata(in: 1_048_000..<2_500_001)) == nil)
            #expect(try origin.count(large) == 2)  // one through the proxy, one direct
        }

        /// On a keep-alive connection consecutive large hits (sendfile bodies behind in-memory
        /// heads) arrive whole and in order.
        @Test func consecutiveLargeHitsOnOneConnectionArriveWhole() throws {
            let origin = try Origin()
            let larder = try Larder()
            let large = "/large?cc=max-age=60&size=150000"
            let expected = try origin.directBody(large)
            _ = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            let connection = try RawConnection(port: larder.proxyPort)
            for index in 0..<8 {
                connection.send("GET \(origin.url(large)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
                let response = try connection.readResponse()
                #expect(response.status == 200, "response \(index)")
                #expect(response.header("Cache-Status")?.hasPrefix("larder; hit") == true, "response \(index)")
                #expect(bodyMismatch(Data(response.body), expected) == nil, "response \(index)")
            }
            #expect(try origin.count(large) == 2)  // one through the proxy, one direct
        }

        /// Requests pipelined behind large hits are answered after them: three large hits sent
        /// in one write come back whole and in order, then a small one on the same connection.
        @Test func pipelinedRequestsWaitForALargeBody() throws {
            let origin = try Origin()
            let larder = try Larder()
            let large = "/large?cc=max-age=60&size=150000"
            let small = "/small?cc=max-age=60&size=1000"
            let expectedLarge = try origin.directBody(large)
            let expectedSmall = try origin.directBody(small)
            _ = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            _ = try Curl.viaProxy(larder.proxy, [origin.url(small)])
            let connection = try RawConnection(port: larder.proxyPort)
            let request = "GET \(origin.url(large)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
            connection.send(request + request + request + "GET \(origin.url(small)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            for index in 0..<3 {
                let response = try connection.readResponse()
                #expect(response.status == 200, "response \(index)")
                #expect(response.header("Cache-Status")?.hasPrefix("larder; hit") == true, "response \(index)")
                #expect(bodyMismatch(Data(response.body), expectedLarge) == nil, "response \(index)")
            }
            let last = try connection.readResponse()
            #expect(bodyMismatch(Data(last.body), expectedSmall) == nil)
            #expect(try origin.count(large) == 2)  // one through the proxy, one direct
        }

        /// `memory.files` from the stats document.
        private func reportedMemoryFiles(_ larder: Larder) throws -> Int? {
            try larder.stats().memory.files
        }

        /// A miss forwards the origin's `Age`; the stored copy drops it and each hit sends its
        /// own (RFC 9111 §5.1, §4.2.3). The miss's head and the stored head are built from the
        /// same serialized fields only when no `Age` was dropped, so both cases are checked.
        @Test func missForwardsTheOriginsAgeAndHitsComputeTheirOwn() throws {
            let origin = try Origin()
            let larder = try Larder()
            for (path, originAge) in [("/aged?cc=max-age=600&h=Age:100", "100"), ("/unaged?cc=max-age=600", nil)] {
                let miss = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(miss.header("age") == originAge, "\(path): the origin's Age, as sent")
                #expect(miss.header("cache-control") == "max-age=600")
                #expect(miss.headers.filter { $0.0.lowercased() == "via" }.count == 1)
                let hit = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(hit.cacheStatus?.isMemoryHit == true)
                let age = try #require(hit.header("age").flatMap { Int($0) })
                if originAge != nil {
                    #expect((100...110).contains(age), "\(path): the initial age counts, got \(age)")
                } else {
                    #expect((0...10).contains(age), "\(path): got \(age)")
                }
                #expect(hit.headers.filter { $0.0.lowercased() == "age" }.count == 1)
                #expect(bodyMismatch(hit.body, miss.body) == nil)
            }
        }

        /// Descriptors of `larder`'s process that are its anonymous body files.
        private func memoryFiles(of larder: Larder) throws -> Int {
            let directory = "/proc/\(larder.child.processIdentifier)/fd"
            return try FileManager.default.contentsOfDirectory(atPath: directory).filter { name in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + name))?.hasPrefix("/memfd:larder-body")
                    == true
            }.count
        }

        @Test func uncacheableResponsesGoUpstreamEveryTime() throws {
            let origin = try Origin()
            let larder = try Larder()
            for path in ["/a?cc=no-store", "/b?cc=private,max-age=60", "/c"] {
                for _ in 0..<2 {
                    let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                    #expect(result.status == 200)
                    #expect(result.header("cache-status") == "larder; fwd=uri-miss")
                }
                #expect(try origin.count(path) == 2)
            }
        }

        /// Upstream curl handles are recycled with their options kept; a method, upload or
        /// HEAD-ness set for one request must not carry over to the next on the same handle.
        @Test func recycledUpstreamHandlesForgetTheLastMethod() throws {
            let origin = try Origin()
            let larder = try Larder()
            let steps: [(arguments: [String], path: String, method: String)] = [
                (["--data-binary", "abc"], "/r1?echo=1", "POST"),
                ([], "/r2?size=100&cc=no-store", "GET"),
                (["-I"], "/r3?size=100&cc=no-store", "HEAD"),
                ([], "/r4?size=100&cc=no-store", "GET"),
                (["-X", "OPTIONS"], "/r5?echo=1", "OPTIONS"),
                ([], "/r6?size=100&cc=no-store", "GET"),
                // A GET with a body stays a GET (curl's upload switch alone would make it a PUT).
                (["-X", "GET", "--data-binary", "xyz"], "/r7?echo=1", "GET"),
            ]
            for step in steps {
                let result = try Curl.viaProxy(larder.proxy, step.arguments + [origin.url(step.path)])
                #expect(result.status == 200, "\(step.method) \(step.path)")
                if step.method == "GET" && step.arguments.isEmpty { #expect(result.body.count == 100, "\(step.path) got its body") }
                if step.method == "POST" { #expect(result.text == "abc") }
                if step.path == "/r7?echo=1" { #expect(result.text == "xyz", "the body went upstream") }
            }
            let seen = try origin.requests().filter { $0.target.hasPrefix("/r") }
            #expect(seen.map(\.method) == steps.map(\.method))
            #expect(seen.map(\.target) == steps.map(\.path))
        }

        /// An upstream handle keeps its origin as curl's URL handle, set only when it changes, and
        /// the request target apart: misses alternating between origins (IPv4 and IPv6) on
        /// recycled handles reach the origin each asked for, path and query byte for byte
        /// (percent-escapes in upper case stay so; curl's URL setters lower-case them).
        @Test func recycledUpstreamHandlesFollowEachRequestsOrigin() throws {
            var origins = [try Origin(), try Origin()]
            if (try? RawConnectionProbe.ipv6Available()) == true { origins.append(try Origin(ipv6: true)) }
            let larder = try Larder()
            let paths = [
                "/u1?size=11&cc=no-store", "/u2/../u3?size=12&cc=no-store", "/u4/./?size=13&cc=no-store&q=a?b",
                "/u5:x@y;z,(!)%2F%7E?size=14&cc=no-store&e=%7E%20", "/u6?size=15&cc=no-store&",
            ]
            for path in paths {
                for origin in origins {
                    let result = try Curl.viaProxy(larder.proxy, ["--path-as-is", origin.url(path)])
                    #expect(result.status == 200, "\(origin.url(path))")
                    #expect(result.header("cache-status") == "larder; fwd=uri-miss", "\(origin.url(path))")
                }
            }
            for origin in origins {
                let seen = try origin.requests().map(\.target).filter { $0.hasPrefix("/u") }
                #expect(seen == paths, "\(origin.url(""))")
            }
        }

        /// The request target reaches the origin as the client sent it: doubled slashes (an
        /// object store's key may start with one), dot segments and upper-case escapes are not
        /// normalized away, through a handle that carried another path just before.
        @Test func theRequestTargetReachesTheOriginAsSent() throws {
            let origin = try RawOrigin()
            let paths = ["//double//slash", "/a/./b/../c", "/%7E/%2F?q=%7E&&r=/x/../y", "/plain?"]
            for path in paths {
                origin.script(path, RawOrigin.Script("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok"))
            }
            let larder = try Larder()
            // Raw requests: curl's own client would drop the empty query of "/plain?".
            let connection = try RawConnection(port: larder.proxyPort)
            for path in paths {
                connection.send("GET \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
                let response = try connection.readResponse()
                #expect(response.status == 200 && response.body == Array("ok".utf8), "\(path): \(response.status)")
                #expect(origin.count(path) == 1, "\(path) reached the origin as sent")
            }
        }

        /// A HEAD's content is not forwarded (curl would turn the request into a PUT to send
        /// it); the HEAD is, and the unread body ends the client's connection.
        @Test func headWithABodyStaysAHeadWithoutItsBody() throws {
            let origin = try Origin()
            let larder = try Larder()
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send(
                "HEAD \(origin.url("/hb?size=100&cc=no-store")) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n"
                    + "Content-Length: 3\r\n\r\nxyz")
            let response = try connection.readResponse(headRequest: true)
            #expect(response.status == 200)
            #expect(response.body.isEmpty)
            #expect(connection.peerClosed(), "the unread body ends the connection")
            let seen = try origin.requests().filter { $0.target.hasPrefix("/hb") }
            #expect(seen.map(\.method) == ["HEAD"])
        }

        /// The curl header list writes each value byte for byte: obs-text (bytes over 0x7F, which
        /// Larder holds as Latin-1 scalars) goes back out as the same bytes, and an empty value is
        /// sent empty ("Name;" in curl's list: "Name:" would remove the field instead).
        @Test func headerValuesGoUpstreamByteForByte() throws {
            let origin = try Origin()
            let larder = try Larder()
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send(
                Array("GET \(origin.url("/bytes?size=10&cc=no-store")) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\nX-Latin: caf".utf8)
                    + [0xE9, 0x20, 0xFF] + Array("\r\nX-Empty:\r\n\r\n".utf8))
            #expect(try connection.readResponse().status == 200)
            let seen = try #require(try origin.requests().last { $0.target.hasPrefix("/bytes") })
            // The origin (Python) reads header bytes as ISO-8859-1: one scalar per byte.
            #expect(seen.headers.first { $0.0 == "X-Latin" }?.1 == "caf\u{E9} \u{FF}", "\(seen.headers)")
            #expect(seen.headers.first { $0.0 == "X-Empty" }?.1 == "", "\(seen.headers)")
        }

        @Test func keepAliveConnectionServesSeveralRequests() throws {
            let origin = try Origin()
            let larder = try Larder()
            let connection = try RawConnection(port: larder.proxyPort)
            for index in 0..<3 {
                connection.send("GET \(origin.url("/k\(index)?size=\(100 + index)")) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
                let response = try connection.readResponse()
                #expect(response.status == 200)
                #expect(response.body.count == 100 + index)
            }
        }

        @Test func pipelinedRequestsAreAnsweredInOrder() throws {
            let origin = try Origin()
            let larder = try Larder()
            // Warm one URL so the pipeline mixes a hit between misses.
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/p2?size=20&cc=max-age=60")])
            let connection = try RawConnection(port: larder.proxyPort)
            let paths = ["/p1?size=10&delay=0.2", "/p2?size=20&cc=max-age=60", "/p3?size=30", "/p4?size=40&chunked=1"]
            connection.send(paths.map { "GET \(origin.url($0)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n" }.joined())
            for (path, size) in zip(paths, [10, 20, 30, 40]) {
                let response = try connection.readResponse()
                #expect(response.body.count == size, "response to \(path)")
                #expect(Data(response.body) == (try origin.directBody(path)))
            }
        }

        /// Pipelined misses for one URL while its fill runs: each request is begun only after
        /// the fill's pass that ended the response before it (the finished reader leaves the
        /// fill there), so each gets the whole body, in order, from the one fetch; sized and
        /// chunked bodies alike.
        @Test func pipelinedRequestsForTheURLBeingFetchedShareTheFetch() throws {
            let origin = try Origin()
            let larder = try Larder()
            let sized = "/same?cc=max-age=60&size=3000&delay=0.2"
            let chunked = "/same-chunked?cc=max-age=60&size=3000&chunked=1&delay=0.2"
            let paths = [sized, sized, sized, chunked, chunked, "/other?size=10"]
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send(paths.map { "GET \(origin.url($0)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n" }.joined())
            for (index, path) in paths.enumerated() {
                let response = try connection.readResponse()
                #expect(response.status == 200, "response \(index)")
                #expect(bodyMismatch(Data(response.body), try origin.directBody(path)) == nil, "response \(index)")
            }
            #expect(try origin.count(sized) == 4)  // one through the proxy, three direct
            #expect(try origin.count(chunked) == 3)  // one through the proxy, two direct
        }

        /// A hit's per-response fields are written into a buffer the event loop shares between
        /// connections; while they wait in a slow reader's queue, hits for other clients must
        /// not change them.
        @Test func queuedHitsOfASlowReaderKeepTheirFieldsWhileOthersAreServed() throws {
            let origin = try Origin()
            let larder = try Larder()
            let large = "/large?size=200000&cc=max-age=600"
            let small = "/small?size=100&cc=max-age=600"
            _ = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            _ = try Curl.viaProxy(larder.proxy, [origin.url(small)])
            let expected = try origin.directBody(large)
            let slow = try RawConnection(port: larder.proxyPort)
            // 60 pipelined hits, 12 MB: more than loopback buffers take, so responses stay queued.
            let count = 60
            slow.send(String(repeating: "GET \(origin.url(large)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n", count: count))
            Thread.sleep(forTimeInterval: 0.3)
            for _ in 0..<5 {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(small)])
                #expect(result.status == 200)
                #expect(result.header("Content-Length") == "100")
            }
            for index in 0..<count {
                let response = try slow.readResponse()
                #expect(response.status == 200, "response \(index)")
                #expect(response.header("Content-Length") == "200000", "response \(index)")
                #expect(response.header("Cache-Status")?.contains("hit") == true, "response \(index)")
                #expect(bodyMismatch(Data(response.body), expected) == nil, "response \(index)")
            }
        }

        @Test func hundredConcurrentClientsAllGetTheirBodies() throws {
            let origin = try Origin()
            let larder = try Larder()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var arguments = ["--parallel", "--parallel-max", "100", "--parallel-immediate", "--proxy", larder.proxy]
            for index in 0..<100 {
                let cacheable = index % 2 == 0 ? "&cc=max-age=60" : ""
                arguments += [
                    "-o", "\(directory)/\(index)", origin.url("/c\(index % 10)?size=\(1000 + index % 10)\(cacheable)&delay=0.05"),
                ]
            }
            let child = try ChildProcess("/usr/bin/curl", ["-s", "-S", "--max-time", "30"] + arguments)
            child.process.waitUntilExit()
            #expect(child.process.terminationStatus == 0, "curl: \(child.stderr)")
            for index in 0..<100 {
                let body = FileManager.default.contents(atPath: "\(directory)/\(index)") ?? Data()
                #expect(body.count == 1000 + index % 10, "client \(index)")
            }
        }

        /// Cacheable: the body goes to the disk tier as it streams; `no-store`: nothing keeps it,
        /// so the transfer is paused for the client. Either way memory stays bounded.
        @Test(arguments: ["cc=max-age=60", "cc=no-store"])
        func largeBodyStreamsThroughInBoundedMemory(_ query: String) throws {
            let origin = try Origin()
            let larder = try Larder()
            usleep(200_000)
            let idle = larder.child.residentKiB()
            let size = 200 * 1024 * 1024
            let child = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-s", "-S", "--max-time", "120", "--proxy", larder.proxy, "-o", "/dev/null", "-w", "%{size_download}",
                    origin.url("/big?size=\(size)&\(query)"),
                ])
            var peak = idle
            while child.isRunning {
                peak = max(peak, larder.child.residentKiB())
                usleep(20_000)
            }
            child.process.waitUntilExit()
            #expect(child.process.terminationStatus == 0, "curl: \(child.stderr)")
            #expect(child.stdout == "\(size)")
            #expect(peak - idle < 64 * 1024, "RSS grew by \(peak - idle) KiB")
        }

        @Test func refusedUpstreamGets502() throws {
            let larder = try Larder()
            let closedPort = try Self.unusedPort()
            let result = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(closedPort)/x"])
            #expect(result.status == 502)
            #expect(result.header("cache-status")?.contains("detail=\"connect") == true)
            #expect(result.text.contains("cannot connect upstream"))
        }

        @Test func silentUpstreamGets504() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[upstream]\ntimeout = \"1s\"\n")
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/slow?hang=1")])
            #expect(result.status == 504)
            #expect(result.header("cache-status")?.contains("detail=\"timeout") == true)
        }

        @Test func truncatedUpstreamIsSeenAsTruncatedAndNotStored() throws {
            let origin = try Origin()
            let larder = try Larder()
            for chunked in ["", "&chunked=1"] {
                let path = "/t?size=100000&truncate=30000&cc=max-age=60\(chunked)"
                let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(first.exitCode == 18, "curl must report a partial transfer, got \(first.exitCode)")
                #expect(first.body.count < 100_000)
                let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(second.exitCode == 18)
                #expect(try origin.count(path) == 2)
            }
        }

        @Test func headIsAnsweredFromAStoredGet() throws {
            let origin = try Origin()
            let larder = try Larder()
            let path = "/h?size=777&cc=max-age=60"
            _ = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            // HEAD then GET on one connection: the GET parses only if the HEAD answer had no body.
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send("HEAD \(origin.url(path)) HTTP/1.1\r\nHost: x\r\n\r\nGET \(origin.url(path)) HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try connection.readResponse(headRequest: true)
            let get = try connection.readResponse()
            #expect(head.status == 200)
            #expect(head.cacheStatus?.isMemoryHit == true)
            #expect(head.header("content-length") == "777")
            #expect(get.body.count == 777)
            #expect(try origin.count(path) == 1)
        }

        @Test func hopByHopFieldsAreNotForwarded() throws {
            let origin = try Origin()
            let larder = try Larder()
            let result = try Curl.viaProxy(
                larder.proxy,
                [
                    "-H", "Connection: X-Private", "-H", "X-Private: secret", "-H", "Proxy-Authorization: Basic Zm9vOmJhcg==",
                    "-H", "TE: trailers", "-H", "X-Kept: yes", origin.url("/hop?h=Connection:X-Secret&h=X-Secret:1&h=Keep-Alive:timeout=5"),
                ])
            #expect(result.status == 200)
            #expect(result.header("x-secret") == nil)
            #expect(result.header("keep-alive") == nil)
            let seen = try #require(try origin.requests().last { $0.target.hasPrefix("/hop") })
            let names = Set(seen.headers.map { $0.0.lowercased() })
            #expect(!names.contains("x-private"))
            #expect(!names.contains("proxy-authorization"))
            #expect(!names.contains("te"))
            #expect(names.contains("x-kept"))
            #expect(seen.headers.first { $0.0.lowercased() == "via" }?.1.contains("1.1 larder") == true)
            #expect(seen.headers.first { $0.0.lowercased() == "host" }?.1 == "127.0.0.1:\(origin.port)")
        }

        /// An origin's hop-by-hop fields in any case and more than once, and the names its
        /// `Connection` lines list (a known one, Set-Cookie, among them), are gone from the
        /// answer and from the stored copy a hit serves (RFC 9110 §7.6.1); the rest stays. With
        /// the listed Set-Cookie gone, the response is stored (RFC 9111 §3).
        @Test func hopByHopResponseFieldsInAnyCaseAreGoneFromTheStoredCopy() throws {
            let origin = try Origin()
            let larder = try Larder()
            let fields = [
                "connection:SET-COOKIE,X-Secret", "CONNECTION:x-other", "Set-Cookie:a=b", "X-Secret:1", "x-other:2",
                "kEEp-aLive:timeout=5", "Keep-Alive:max=3", "PROXY-CONNECTION:keep-alive", "upgrade:h2c", "TRAILER:X-T",
                "Proxy-Authenticate:Basic", "te:trailers", "X-Kept:yes",
            ]
            let path = "/hop-stored?cc=max-age=60&" + fields.map { "h=\($0)" }.joined(separator: "&")
            let gone = [
                "set-cookie", "x-secret", "x-other", "keep-alive", "proxy-connection", "upgrade", "trailer", "proxy-authenticate", "te",
            ]
            for round in 0..<2 {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(result.status == 200)
                for name in gone { #expect(result.header(name) == nil, "\(name) in answer \(round)") }
                #expect(result.header("x-kept") == "yes")
                #expect(result.header("cache-control") == "max-age=60")
            }
            #expect(try origin.count(path) == 1, "the second answer is the stored copy")
        }

        @Test func requestBodiesStreamUpstream() throws {
            let origin = try Origin()
            let larder = try Larder()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let payload = Data((0..<3_000_000).map { UInt8($0 % 251) })
            let file = directory + "/payload"
            try payload.write(to: URL(fileURLWithPath: file))
            // Content-Length body with Expect: 100-continue (curl sends it for large bodies).
            let sized = try Curl.viaProxy(
                larder.proxy, ["--data-binary", "@\(file)", "-H", "Expect: 100-continue", origin.url("/echo?echo=1")])
            #expect(sized.status == 200)
            #expect(bodyMismatch(sized.body, payload) == nil)
            // Chunked body.
            let chunked = try Curl.viaProxy(
                larder.proxy, ["--data-binary", "@\(file)", "-H", "Transfer-Encoding: chunked", origin.url("/echo2?echo=1")])
            #expect(chunked.status == 200)
            #expect(bodyMismatch(chunked.body, payload) == nil)
            #expect(chunked.header("cache-status") == "larder; fwd=method")
            // 100-continue is answered on the client side; curl would ask the origin for it again
            // for both bodies (over 1 MiB, and of unknown length) unless told not to.
            for path in ["/echo?", "/echo2?"] {
                let seen = try #require(try origin.requests().last { $0.target.hasPrefix(path) })
                #expect(!seen.headers.contains { $0.0.lowercased() == "expect" }, "\(path): \(seen.headers)")
            }
        }

        @Test func daemonsOwnProxyEnvironmentIsIgnored() throws {
            let origin = try Origin()
            let larder = try Larder(environment: ["http_proxy": "http://127.0.0.1:1", "HTTP_PROXY": "http://127.0.0.1:1"])
            let result = try Curl.viaProxy(larder.proxy, [origin.url("/env")])
            #expect(result.status == 200)
        }

        @Test func http10ClientGetsACloseDelimitedBodyWhenLengthIsUnknown() throws {
            let origin = try Origin()
            let larder = try Larder()
            let connection = try RawConnection(port: larder.proxyPort)
            connection.send("GET \(origin.url("/ten?size=3000&chunked=1")) HTTP/1.0\r\n\r\n")
            let response = try connection.readResponse()
            #expect(response.status == 200)
            #expect(response.header("transfer-encoding") == nil)
            #expect(response.body.count == 3000)
        }

        @Test func listensOnIPv6Loopback() throws {
            guard (try? RawConnectionProbe.ipv6Available()) == true else { return }
            let origin = try Origin()
            let larder = try Larder(listen: ["[::1]:0"])
            let result = try Curl.run(["--proxy", "http://[::1]:\(larder.proxyPort)", origin.url("/six")])
            #expect(result.status == 200)
        }

        static func unusedPort() throws -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            return Int(UInt16(bigEndian: address.sin_port))
        }
    }
}

/// Whether this machine has an IPv6 loopback to test on.
enum RawConnectionProbe {
    static func ipv6Available() throws -> Bool {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        inet_pton(AF_INET6, "::1", &address.sin6_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        return result == 0
    }
}

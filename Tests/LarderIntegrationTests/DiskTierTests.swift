import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// The persistent tier through the real daemon: restarts, crashes, corruption, limits.
    @Suite(.timeLimit(.minutes(3))) struct DiskTier {
        /// Open descriptors of a process, from /proc.
        static func openDescriptors(_ pid: pid_t) throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        }

        /// A memory tier too small to hold any of the bodies below (fills still keep bodies up to
        /// 8 MiB whole, so small ones become segment records): every hit is a disk hit.
        static let diskOnly = "[memory]\nmax_bytes = \"1KiB\"\n"

        static func corruptions(_ larder: Larder) throws -> Double {
            metricValue(try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text, "larder_disk_corruptions_total")
        }

        static func fileSize(_ path: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? -1
        }

        /// Flips one byte of `file` at `offset` (negative: from the end).
        static func flip(_ file: String, at offset: Int) throws {
            let handle = try #require(FileHandle(forUpdatingAtPath: file))
            defer { try? handle.close() }
            let size = try handle.seekToEnd()
            let position = offset < 0 ? UInt64(Int(size) + offset) : UInt64(offset)
            try handle.seek(toOffset: position)
            let byte = try #require(try handle.read(upToCount: 1)).first!
            try handle.seek(toOffset: position)
            handle.write(Data([byte ^ 0x01]))
        }

        /// Review 81 N2: a refresh whose body is too large for the memory tier was streamed to
        /// disk while the old small copy in memory went on answering every request.
        @Test func aRefreshTooLargeForMemoryReplacesTheCopyInMemory() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[memory]\nmax_object_bytes = \"32KiB\"\n")
            let path = "/grows"
            let large = String(repeating: "b", count: 200_000)
            let fresh = [("Cache-Control", "max-age=600")]
            try origin.script(path, [Scripted(headers: fresh, body: "small"), Scripted(headers: fresh, body: large)], conditional: false)
            let url = origin.url(path)
            #expect(try Curl.viaProxy(larder.proxy, [url]).text == "small")
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.isMemoryHit == true)
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: no-cache", url]).body.count == 200_000)
            var after = try Curl.viaProxy(larder.proxy, [url])
            for _ in 0..<20 where after.body.count != 200_000 {
                usleep(100_000)  // indexed by the writer thread
                after = try Curl.viaProxy(larder.proxy, [url])
            }
            #expect(after.body.count == 200_000, "\(after.text.prefix(20)) \(after.header("cache-status") ?? "-")")
            #expect(try origin.count(path) == 2)
        }

        /// Review 82 R82-2: a Vary variant too large for memory, streamed to disk, took every
        /// variant of its URL out of memory with it; only its own older copy goes.
        @Test func aLargeVariantStreamedToDiskLeavesTheOtherVariantsInMemory() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "[memory]\nmax_object_bytes = \"32KiB\"\n")
            let path = "/variants"
            let head = "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nVary: X-V\r\n"
            origin.script(path, RawOrigin.Script(head + "Content-Length: 5\r\n\r\nsmall"))
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "X-V: s", origin.url(path)]).text == "small")
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "X-V: s", origin.url(path)]).cacheStatus?.isMemoryHit == true)
            origin.script(path, RawOrigin.Script(head + "Content-Length: 200000\r\n\r\n" + String(repeating: "L", count: 200_000)))
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "X-V: L", origin.url(path)]).body.count == 200_000)
            var large = try Curl.viaProxy(larder.proxy, ["-H", "X-V: L", origin.url(path)])
            for _ in 0..<20 where large.cacheStatus?.hit != true {
                usleep(100_000)  // indexed by the writer thread
                large = try Curl.viaProxy(larder.proxy, ["-H", "X-V: L", origin.url(path)])
            }
            #expect(large.cacheStatus?.detail == "disk" && large.body.count == 200_000)
            let small = try Curl.viaProxy(larder.proxy, ["-H", "X-V: s", origin.url(path)])
            #expect(small.text == "small")
            #expect(small.cacheStatus?.isMemoryHit == true, "\(small.header("cache-status") ?? "-")")
            #expect(origin.count(path) == 2)
        }

        /// A route that never coalesces, so two fills of one variant can overlap.
        static let racing = """
            [memory]
            max_object_bytes = "100KiB"
            [[route]]
            match = "http://127.0.0.1:*/race*"
            dedup = "never"
            """

        /// Review 82 R82-1, review 83 F1: of two fills of one variant at once, the slow one that
        /// began first finished last, and its older response replaced the newer one: in both
        /// tiers (and for good on disk) when the older was streamed to disk, in memory alone when
        /// it was small and the newer one streamed. `older`: its body's pieces, sent 0.25 s apart
        /// after its head; `newer`: its body's size.
        @Test(arguments: [(older: 8, pieceSize: 64 << 10, newer: 5), (older: 5, pieceSize: 10_000, newer: 512 << 10)])
        func aSlowerOlderFillDoesNotReplaceANewerResponse(older pieces: Int, pieceSize: Int, newer: Int) throws {
            let origin = try RawOrigin()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var larder: Larder? = try Larder(config: Self.racing, cacheDirectory: directory + "/cache")
            let proxy = try #require(larder).proxy
            let path = "/race"
            let piece = [UInt8](repeating: UInt8(ascii: "o"), count: pieceSize)
            let olderHead = "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: \(pieces * pieceSize)\r\n\r\n"
            origin.script(path, RawOrigin.Script(pieces: [Array(olderHead.utf8)] + Array(repeating: piece, count: pieces), pause: 0.25))
            let olderFill = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "30", "--proxy", proxy, "-o", directory + "/older", origin.url(path)])
            defer { _ = olderFill.stop() }
            for _ in 0..<50 where origin.count(path) == 0 { usleep(20_000) }
            #expect(origin.count(path) == 1)
            usleep(200_000)  // the older head has arrived
            let newerBody = String(repeating: "n", count: newer)
            let newerHead = "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: \(newer)\r\n\r\n"
            origin.script(path, RawOrigin.Script(newerHead + newerBody))
            #expect(try Curl.viaProxy(proxy, [origin.url(path)]).body.count == newer)
            olderFill.waitUntilExit()
            #expect(FileManager.default.contents(atPath: directory + "/older")?.count == pieces * pieceSize)
            usleep(300_000)  // the writer thread has finished the older write
            for _ in 0..<3 {
                let hit = try Curl.viaProxy(proxy, [origin.url(path)])
                let isNewer = hit.text == newerBody  // not the older body in the report
                #expect(isNewer, "\(hit.body.count) bytes, \(hit.header("cache-status") ?? "-")")
                #expect(hit.cacheStatus?.hit == true)
            }
            #expect(larder?.stop() == 0)
            larder = nil
            let restarted = try Larder(config: Self.racing, cacheDirectory: directory + "/cache")
            let afterRestart = try Curl.viaProxy(restarted.proxy, [origin.url(path)])
            let isNewer = afterRestart.text == newerBody
            #expect(isNewer, "\(afterRestart.body.count) bytes from the disk tier")
            #expect(origin.count(path) == 2)
        }

        /// Waits until `path`'s stored response is stale, then starts a revalidation of it through
        /// `proxy` (a curl writing the body to `output`) that the origin answers with a 304 of
        /// max-age=600 only 1.5 s after its status line; returns once the origin has the request.
        static func startLateRevalidation(
            _ origin: RawOrigin, proxy: String, path: String, output: String = "/dev/null", validator: String = "ETag: \"v1\""
        ) throws -> ChildProcess {
            usleep(1_300_000)  // stale
            let requests = origin.count(path)
            let late = ["HTTP/1.1 304 Not Modified\r\n", validator + "\r\nCache-Control: max-age=600\r\n\r\n"]
            origin.script(path, RawOrigin.Script(pieces: late.map { Array($0.utf8) }, pause: 1.5))
            let revalidation = try ChildProcess(
                "/usr/bin/curl", ["-s", "--max-time", "30", "--proxy", proxy, "-o", output, origin.url(path)])
            for _ in 0..<50 where origin.count(path) == requests { usleep(20_000) }
            #expect(origin.count(path) == requests + 1)
            return revalidation
        }

        /// Review 83 F2, review 84 N1: a 304 that came late, after a fetch that did not join its
        /// revalidation stored another response of the variant, put the validated response's
        /// fields over that response's body on disk (for good), and the validated response back
        /// in memory, also when the other response was too large for memory and left it none.
        /// The 304 updates only the response it validated (RFC 9111 §4.3.4). `newer`: the other
        /// response's body size (512 KiB: streamed to disk only).
        @Test(arguments: [6, 512 << 10]) func aLate304DoesNotUpdateAResponseStoredSince(newer: Int) throws {
            let origin = try RawOrigin()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var larder: Larder? = try Larder(config: Self.racing, cacheDirectory: directory + "/cache")
            let proxy = try #require(larder).proxy
            let path = "/race-304"
            func response(_ version: String, maxAge: Int, body: String) -> String {
                "HTTP/1.1 200 OK\r\nCache-Control: max-age=\(maxAge)\r\nETag: \"\(version)\"\r\nContent-Type: text/\(version)\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
            }
            origin.script(path, RawOrigin.Script(response("v1", maxAge: 1, body: "V1V1")))
            #expect(try Curl.viaProxy(proxy, [origin.url(path)]).text == "V1V1")
            let revalidation = try Self.startLateRevalidation(origin, proxy: proxy, path: path, output: directory + "/revalidated")
            defer { _ = revalidation.stop() }
            let v2 = String(repeating: "V2", count: newer / 2)
            origin.script(path, RawOrigin.Script(response("v2", maxAge: 600, body: v2)))
            #expect(try Curl.viaProxy(proxy, ["-H", "Cache-Control: no-cache", origin.url(path)]).body.count == newer)
            revalidation.waitUntilExit()
            #expect(String(decoding: FileManager.default.contents(atPath: directory + "/revalidated") ?? Data(), as: UTF8.self) == "V1V1")
            usleep(300_000)  // the writer thread has finished the refresh, if any
            func isV2(_ result: Curl.Result) -> Bool {
                result.text == v2 && result.header("etag") == "\"v2\"" && result.header("content-type") == "text/v2"
            }
            for _ in 0..<2 {
                let hit = try Curl.viaProxy(proxy, [origin.url(path)])
                #expect(isV2(hit), "\(hit.body.count) bytes, \(hit.header("etag") ?? "-"), \(hit.header("cache-status") ?? "-")")
                #expect(hit.cacheStatus?.hit == true)
            }
            #expect(larder?.stop() == 0)
            larder = nil
            let restarted = try Larder(config: Self.racing, cacheDirectory: directory + "/cache")
            let fromDisk = try Curl.viaProxy(restarted.proxy, [origin.url(path)])
            #expect(isV2(fromDisk), "\(fromDisk.body.count) bytes, \(fromDisk.header("etag") ?? "-")")
            #expect(fromDisk.cacheStatus?.isDiskHit == true)
            #expect(origin.count(path) == 3)
        }

        /// Review 84 N2: a copy promoted into memory by a 304 kept the serial of the disk entry it
        /// was read from; the 304's rewrite of that entry outdated it, so the next 304's
        /// freshness never reached memory, and every request after it was revalidated again.
        @Test func eachRevalidationOfAPromotedCopyRefreshesIt() throws {
            let origin = try RawOrigin()
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var larder: Larder? = try Larder(config: "", cacheDirectory: directory + "/cache")
            let path = "/promoted"
            let body = String(repeating: "p", count: 4000)
            let v1 = "HTTP/1.1 200 OK\r\nCache-Control: max-age=1\r\nETag: \"v1\"\r\nContent-Length: 4000\r\n\r\n" + body
            origin.script(path, RawOrigin.Script(v1))
            #expect(try Curl.viaProxy(try #require(larder).proxy, [origin.url(path)]).text == body)
            usleep(300_000)  // on disk
            #expect(larder?.stop() == 0)
            larder = nil
            let restarted = try Larder(config: "", cacheDirectory: directory + "/cache")
            usleep(1_000_000)  // stale
            func notModified(maxAge: Int) -> RawOrigin.Script {
                RawOrigin.Script("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=\(maxAge)\r\n\r\n")
            }
            origin.script(path, notModified(maxAge: 1))
            #expect(try Curl.viaProxy(restarted.proxy, [origin.url(path)]).text == body)  // read from disk, promoted
            usleep(1_300_000)  // stale again
            origin.script(path, notModified(maxAge: 600))
            #expect(try Curl.viaProxy(restarted.proxy, [origin.url(path)]).text == body)
            #expect(origin.count(path) == 3)
            for _ in 0..<3 {
                let hit = try Curl.viaProxy(restarted.proxy, [origin.url(path)])
                #expect(hit.text == body && hit.cacheStatus?.hit == true, "\(hit.header("cache-status") ?? "-")")
            }
            #expect(origin.count(path) == 3, "fresh for 600 s after the second 304")
        }

        /// Review 85 R85-1: a POST's invalidation of a URL (RFC 9111 §4.4) while a 304 for it was
        /// on its way was undone: the 304 put the validated response back in memory.
        @Test func anInvalidationIsNotUndoneByA304OnItsWay() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "")
            let path = "/invalidated"
            let body = String(repeating: "1", count: 4000)
            origin.script(
                path, RawOrigin.Script("HTTP/1.1 200 OK\r\nCache-Control: max-age=1\r\nETag: \"v1\"\r\nContent-Length: 4000\r\n\r\n" + body)
            )
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).text == body)
            let revalidation = try Self.startLateRevalidation(origin, proxy: larder.proxy, path: path)
            defer { _ = revalidation.stop() }
            origin.script(path, RawOrigin.Script("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nposted"))
            #expect(try Curl.viaProxy(larder.proxy, ["-X", "POST", "-d", "x", origin.url(path)]).text == "posted")
            revalidation.waitUntilExit()
            origin.script(
                path, RawOrigin.Script("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nETag: \"v2\"\r\nContent-Length: 2\r\n\r\nv2"))
            let after = try Curl.viaProxy(larder.proxy, [origin.url(path)])
            #expect(after.text == "v2", "\(after.body.count) bytes, \(after.header("cache-status") ?? "-")")
            #expect(origin.count(path) == 4)
        }

        /// Review 85 R85-2, review 86 F1: of two validations of one response that overlap (a
        /// client's HEAD beside a GET's revalidation), the one that landed second was refused in
        /// both tiers, and the entry kept the first one's shorter freshness: for every validator
        /// until 3bc5600, then for a weak ETag or a Last-Modified alone, which could not tell the
        /// refreshed response from another. A refresh keeps the time its body arrived, and that
        /// tells them apart. `validator`: the stored response's, the HEAD's and the 304s'.
        @Test(arguments: ["ETag: \"v1\"", "ETag: W/\"v1\"", "Last-Modified: Sun, 01 Nov 2026 00:00:00 GMT"])
        func aSecondValidationOfTheSameResponseLandsToo(validator: String) throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: "")
            let path = "/validated-twice"
            let body = String(repeating: "1", count: 4000)
            let head = "HTTP/1.1 200 OK\r\n\(validator)\r\nContent-Length: 4000\r\n"
            origin.script(path, RawOrigin.Script(head + "Cache-Control: max-age=1\r\n\r\n" + body))
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).text == body)
            let revalidation = try Self.startLateRevalidation(origin, proxy: larder.proxy, path: path, validator: validator)
            defer { _ = revalidation.stop() }
            origin.script(path, RawOrigin.Script(head + "Cache-Control: max-age=2\r\n\r\n"))
            #expect(try Curl.viaProxy(larder.proxy, ["-I", origin.url(path)]).status == 200)
            #expect(origin.count(path) == 3, "the HEAD went to the origin")
            revalidation.waitUntilExit()
            origin.script(path, RawOrigin.Script("HTTP/1.1 304 Not Modified\r\n\(validator)\r\nCache-Control: max-age=600\r\n\r\n"))
            usleep(2_500_000)  // past the HEAD's max-age, within the 304's
            for _ in 0..<2 {
                let hit = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(hit.text == body && hit.cacheStatus?.hit == true, "\(hit.header("cache-status") ?? "-")")
            }
            #expect(origin.count(path) == 3, "fresh for the 304's 600 s")
        }

        @Test func aSegmentCutShortWhileRunningIsDroppedNotServed() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.diskOnly)
            let path = "/cut?size=10000&cc=max-age=600"
            let expected = try origin.directBody(path)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.detail == "disk")
            let segment = try #require(larder.cacheFiles("v1/seg").first)
            truncate(segment, off_t(Self.fileSize(segment) - 5000))
            for _ in 0..<3 {
                let again = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(again.status == 200)
                #expect(again.body == expected, "never a short body")
            }
            #expect(try origin.count(path) == 3, "direct, fill, one refetch (then stored again)")
            #expect(try Self.corruptions(larder) == 1)
        }

        /// A body over `memory.max_object_bytes` but small enough to be a segment record, declared
        /// or not, is kept whole and appended as one, not streamed to a file of its own on the
        /// writer thread (twice the CPU per miss); the memory tier does not take it, not even within
        /// the slack its admission check allows for the entry's head.
        @Test func aSmallBodyTooLargeForTheMemoryTierBecomesASegmentRecord() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[memory]\nmax_object_bytes = \"1KiB\"\n")
            // Declared lengths, and a chunked body of unknown length.
            for path in ["/whole?size=3000", "/whole?size=20000", "/whole?size=20000&chunked=1"].map({ $0 + "&cc=max-age=600" }) {
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.stored == true)
                for _ in 0..<2 {
                    let hit = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                    #expect(hit.body == (try origin.directBody(path)))
                    #expect(hit.cacheStatus?.detail == "disk", "\(path): served from the disk tier, not promoted")
                }
                #expect(try origin.count(path) == 3, "the fill, then one direct request per hit")
            }
            let files = larder.cacheFiles("v1")
            #expect(!files.isEmpty && files.allSatisfy { $0.contains("/v1/seg/") }, "records, not entry files: \(files)")
        }

        /// Kept whole or not, a body over `disk.max_object_bytes` that the memory tier does not
        /// take either is stored nowhere, and the response says so.
        @Test func aSmallBodyNeitherTierTakesIsNotStoredAndNotSaidToBe() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[memory]\nmax_object_bytes = \"1KiB\"\n[disk]\nmax_object_bytes = \"2KiB\"\n")
            let path = "/neither?size=3000&cc=max-age=600"
            let expected = try origin.directBody(path)
            for _ in 0..<2 {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(result.body == expected)
                #expect(
                    result.cacheStatus?.hit == false && result.cacheStatus?.stored == false, "\(String(describing: result.cacheStatus))")
            }
            #expect(try origin.count(path) == 3, "one direct request, then both through the proxy")
            #expect(larder.cacheFiles("v1").isEmpty)
        }

        @Test func aFlippedByteInAnEntryThisProcessWroteIsNotServed() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.diskOnly)
            let small = "/flip-small?size=10000&cc=max-age=600"
            let large = "/flip-large?size=600000&cc=max-age=600"
            for path in [small, large] {
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.hit == true)
            }
            let segment = try #require(larder.cacheFiles("v1/seg").first)
            try Self.flip(segment, at: -100)
            let file = try #require(larder.cacheFiles("v1").first { !$0.contains("/seg/") })
            try Self.flip(file, at: -100)
            for path in [small, large] {
                let again = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(again.body == (try origin.directBody(path)), "\(path): the damaged copy is never served")
                #expect(again.cacheStatus?.hit == false)
                #expect(try origin.count(path) == 3, "fill, direct, refetch")
            }
            #expect(try Self.corruptions(larder) == 2)
        }

        @Test func aFlippedByteInAStoredETagIsCaughtAfterARestart() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let path = "/etag?size=3000000&cc=max-age=600&h=ETag:%22abcdef%22"
            do {
                let first = try Larder(config: Self.diskOnly + "[disk]\nscrub_rate = \"0B\"\n", cacheDirectory: cache)
                #expect(try Curl.viaProxy(first.proxy, [origin.url(path)]).header("etag") == "\"abcdef\"")
                first.stop()
            }
            let file = try #require(FileManager.default.subpaths(atPath: cache + "/v1")?.first { $0.count > 20 && !$0.hasPrefix("seg") })
            var bytes = try Data(contentsOf: URL(fileURLWithPath: cache + "/v1/" + file))
            let head = String(decoding: bytes.prefix(4000), as: UTF8.self)
            let tag = try #require(head.range(of: "\"abcdef\""))
            bytes[head.utf8.distance(from: head.startIndex, to: tag.lowerBound) + 1] = UInt8(ascii: "x")
            try bytes.write(to: URL(fileURLWithPath: cache + "/v1/" + file))

            let second = try Larder(config: Self.diskOnly + "[disk]\nscrub_rate = \"0B\"\n", cacheDirectory: cache)
            let again = try Curl.viaProxy(second.proxy, [origin.url(path)])
            #expect(again.header("etag") == "\"abcdef\"", "the damaged head is never served")
            #expect(try origin.count(path) == 2)
            #expect(try Self.corruptions(second) == 1)
        }

        /// A preamble is read before anything else can vouch for it: a `body-length` near
        /// Int64.max (20 digits fit the field) made the record length overflow, and the daemon
        /// trapped in the start-up scan, again at every restart. Such a record is now malformed:
        /// dropped, and its URL fetched again.
        @Test func aHugeBodyLengthInAnEntryFileOrASegmentRecordDoesNotCrashTheDaemon() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let large = "/bomb-file?size=3000000&cc=max-age=600"
            let small = "/bomb-record?size=1000&cc=max-age=600"
            do {
                let first = try Larder(config: Self.diskOnly + "[disk]\nscrub_rate = \"0B\"\n", cacheDirectory: cache)
                for path in [large, small] { #expect(try Curl.viaProxy(first.proxy, [origin.url(path)]).status == 200) }
                usleep(300_000)  // the writes end after the responses
                first.stop()
            }
            let files = try #require(FileManager.default.subpaths(atPath: cache + "/v1")).filter { $0.count > 20 || $0.hasPrefix("seg/") }
            var rewritten = 0
            for file in files {
                let url = URL(fileURLWithPath: cache + "/v1/" + file)
                guard var bytes = try? Data(contentsOf: url), bytes.count > 133 else { continue }
                let preamble = String(decoding: bytes.prefix(133), as: UTF8.self)
                guard let field = preamble.range(of: "body-length ") else { continue }
                let at = preamble.utf8.distance(from: preamble.startIndex, to: field.upperBound)
                bytes.replaceSubrange(at..<(at + 20), with: Array("09223372036854775807".utf8))
                try bytes.write(to: url)
                rewritten += 1
            }
            #expect(rewritten == 2, "\(files)")

            let second = try Larder(config: Self.diskOnly + "[disk]\nscrub_rate = \"0B\"\n", cacheDirectory: cache)
            for path in [large, small] {
                let again = try Curl.viaProxy(second.proxy, [origin.url(path)])
                let expected = try origin.directBody(path)
                #expect(again.status == 200 && bodyMismatch(again.body, expected) == nil, "\(path)")
                #expect(again.cacheStatus?.hit == false, "\(path): fetched again")
            }
            #expect(try second.activeConnections() >= 0, "still running")
        }

        @Test func theScrubDropsADamagedLargeEntryBeforeAnyoneAsks() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let path = "/scrub?size=2000000&cc=max-age=600"
            do {
                let first = try Larder(config: Self.diskOnly, cacheDirectory: cache)
                #expect(try Curl.viaProxy(first.proxy, [origin.url(path)]).status == 200)
                first.stop()
            }
            let file = try #require(FileManager.default.subpaths(atPath: cache + "/v1")?.first { $0.count > 20 && !$0.hasPrefix("seg") })
            try Self.flip(cache + "/v1/" + file, at: -1000)
            let second = try Larder(config: Self.diskOnly + "[disk]\nscrub_rate = \"256MiB\"\n", cacheDirectory: cache)
            let deadline = Date().addingTimeInterval(10)
            while FileManager.default.fileExists(atPath: cache + "/v1/" + file), Date() < deadline {
                Thread.sleep(forTimeInterval: 0.05)
            }
            #expect(!FileManager.default.fileExists(atPath: cache + "/v1/" + file), "the scrub deleted it")
            #expect(try Self.corruptions(second) == 1)
            let metrics = try Curl.run(["http://127.0.0.1:\(second.adminPort)/metrics"]).text
            #expect(metricValue(metrics, "larder_disk_scrubbed_bytes_total") > 2_000_000)
            #expect(try origin.count(path) == 1, "no request was needed to find it")
        }

        @Test func clearingTheCacheLeavesNoDescriptorBehind() throws {
            let origin = try Origin()
            let larder = try Larder()
            let admin = "http://127.0.0.1:\(larder.adminPort)"
            func storeAndClear(_ round: Int) throws {
                #expect(try Curl.viaProxy(larder.proxy, [origin.url("/fd-\(round)?size=200000&cc=max-age=600")]).status == 200)
                #expect(try Curl.run(["-X", "DELETE", admin + "/cache"]).status == 200)
            }
            for round in 0..<3 { try storeAndClear(round) }
            Thread.sleep(forTimeInterval: 0.3)
            let before = try Self.openDescriptors(larder.child.pid)
            for round in 3..<63 { try storeAndClear(round) }
            Thread.sleep(forTimeInterval: 0.3)
            let after = try Self.openDescriptors(larder.child.pid)
            #expect(after - before < 5, "\(before) descriptors before 60 clears, \(after) after")
            // The tier still works after the clears: stored, then served from disk after memory is gone.
            let url = origin.url("/after-clears?size=3000&cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == true)
            #expect(try origin.count("/after-clears?size=3000&cc=max-age=600") == 1)
        }

        @Test func restartServesHitsFromDiskWithIdenticalBytes() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let paths = ["/small?size=3000&cc=max-age=600", "/large?size=20000000&cc=max-age=600"]
            var first: [Data] = []
            do {
                let larder = try Larder(cacheDirectory: cache)
                for path in paths { first.append(try Curl.viaProxy(larder.proxy, [origin.url(path)]).body) }
                #expect(larder.stop() == 0)
            }
            let larder = try Larder(cacheDirectory: cache)
            for (path, body) in zip(paths, first) {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(result.cacheStatus?.isDiskHit == true)
                #expect(bodyMismatch(result.body, body) == nil)
                #expect(try origin.count(path) == 1)
            }
            // The small one was promoted into memory by its disk hit.
            usleep(200_000)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(paths[0])]).cacheStatus?.isMemoryHit == true)
            // The large one (over memory.max_object_bytes, 16 MiB) stays disk-only.
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(paths[1])]).cacheStatus?.isDiskHit == true)
        }

        @Test func killNineDuringConcurrentFillsLeavesOnlyCompleteEntries() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let size = 20 * 1024 * 1024
            // 20 MiB at 64 KiB every 20 ms: each fill takes ~6.4 s, so some are in flight for
            // ~13 s whatever the load (at 10 ms, on a loaded CI machine, the wait below could
            // outlast every fill, and the crash then caught none).
            let paths = (0..<50).map { "/crash\($0)?size=\(size)&cc=max-age=600&slow=0.02&id=\($0)" }
            do {
                let larder = try Larder(cacheDirectory: cache)
                var clients: [ChildProcess] = []
                for path in paths {
                    clients.append(
                        try ChildProcess(
                            "/usr/bin/curl", ["-s", "--max-time", "60", "--proxy", larder.proxy, "-o", "/dev/null", origin.url(path)]))
                }
                // Let the fills get going (upstream connections per host are capped at 32, so at
                // most 32 run at once), then crash in the middle of them.
                let deadline = Date().addingTimeInterval(10)
                while larder.cacheFiles("tmp").count < 10 && Date() < deadline { usleep(20_000) }
                usleep(200_000)
                larder.child.signal(SIGKILL)
                for client in clients { client.kill() }
                #expect(!larder.cacheFiles("tmp").isEmpty, "the crash should catch fills in progress")
            }
            let larder = try Larder(cacheDirectory: cache)
            usleep(300_000)
            #expect(larder.cacheFiles("tmp").isEmpty, "leftover temporary files are removed at start")
            let fromDisk = try refetch(paths, through: larder, origin: origin, parallel: 50) { _ in size }
            print("after kill -9: \(fromDisk) of 50 entries were complete on disk and served from it")
        }

        /// Fetches every path again through `larder` (after fills, a crash or a restart) and
        /// straight from `origin`, `parallel` at a time and both at once; expects identical bodies of `size(index)` bytes. Returns how
        /// many came from disk (the origin saw only the direct request for them).
        private func refetch(
            _ paths: [String], through larder: Larder, origin: Origin, parallel: Int, size: (Int) -> Int
        ) throws -> Int {
            let before = try paths.map { try origin.count($0) }
            let downloads = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: downloads) }
            var proxied = ["-s", "--max-time", "120", "--parallel", "--parallel-max", "\(parallel)", "--proxy", larder.proxy]
            var direct = ["-s", "--max-time", "120", "--parallel", "--parallel-max", "\(parallel)"]
            for (index, path) in paths.enumerated() {
                proxied += ["-o", "\(downloads)/p\(index)", origin.url(path)]
                direct += ["-o", "\(downloads)/d\(index)", origin.url(path)]
            }
            let viaProxy = try ChildProcess("/usr/bin/curl", proxied)
            let straight = try ChildProcess("/usr/bin/curl", direct)
            viaProxy.process.waitUntilExit()
            straight.process.waitUntilExit()
            #expect(viaProxy.process.terminationStatus == 0)
            var fromDisk = 0
            for index in paths.indices {
                let served = FileManager.default.contents(atPath: "\(downloads)/p\(index)")
                let expected = FileManager.default.contents(atPath: "\(downloads)/d\(index)")
                #expect(served?.count == size(index))
                #expect(served == expected, "response \(index) differs from the origin's")
                if try origin.count(paths[index]) == before[index] + 1 { fromDisk += 1 }
            }
            return fromDisk
        }

        /// Starts one curl fetching every path through `larder`, `parallel` at a time, bodies
        /// discarded; the caller waits for it or kills it.
        private func fetchInParallel(_ paths: [String], through larder: Larder, origin: Origin, parallel: Int) throws -> ChildProcess {
            var arguments = ["-s", "--max-time", "60", "--parallel", "--parallel-max", "\(parallel)", "--proxy", larder.proxy]
            for path in paths { arguments += ["-o", "/dev/null", origin.url(path)] }
            return try ChildProcess("/usr/bin/curl", arguments)
        }

        /// 50 clients at once: a loop appends the records of each epoll batch with one write.
        /// Every entry is then a disk hit with the origin's bytes, in the same process (whose
        /// index placed each record) and after a restart (whose scan read them back).
        @Test func concurrentSmallMissesAreAllOnDiskAndAfterARestart() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let paths = (0..<300).map { "/batch\($0)?size=\(200 + $0 * 37)&cc=max-age=600&delay=0.05" }
            do {
                let larder = try Larder(config: Self.diskOnly, cacheDirectory: cache)
                let client = try fetchInParallel(paths, through: larder, origin: origin, parallel: 50)
                client.process.waitUntilExit()
                #expect(client.process.terminationStatus == 0)
                let fromDisk = try refetch(paths, through: larder, origin: origin, parallel: 50) { 200 + $0 * 37 }
                #expect(fromDisk == paths.count, "every entry is served from disk")
                #expect(larder.stop() == 0)
            }
            let larder = try Larder(config: Self.diskOnly, cacheDirectory: cache)
            let fromDisk = try refetch(paths, through: larder, origin: origin, parallel: 50) { 200 + $0 * 37 }
            #expect(fromDisk == paths.count, "every entry stored before the stop is served from disk")
            #expect(try Self.corruptions(larder) == 0)
        }

        @Test func killNineDuringSmallFillsLeavesWholeRecords() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            // 400 small responses (0.5-39 KB, 20 ms each at the origin): records appended to
            // segments, ~8 MB in all.
            let paths = (0..<400).map { "/small\($0)?size=\(500 + $0 * 97)&cc=max-age=600&delay=0.02" }
            do {
                let larder = try Larder(cacheDirectory: cache)
                let client = try fetchInParallel(paths, through: larder, origin: origin, parallel: 20)
                // Crash once about 1 MB of records is in, while appends go on.
                let deadline = Date().addingTimeInterval(20)
                func onDisk() -> Int {
                    larder.cacheFiles("v1").reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0) }
                }
                while onDisk() < 1_000_000 && Date() < deadline { usleep(1000) }
                larder.child.signal(SIGKILL)
                client.kill()
                #expect(onDisk() >= 1_000_000, "the crash should come in the middle of the fills")
            }
            let larder = try Larder(cacheDirectory: cache)
            let fromDisk = try refetch(paths, through: larder, origin: origin, parallel: 20) { 500 + $0 * 97 }
            #expect(fromDisk >= 50, "the records appended before the crash are served from disk")
            #expect(!larder.child.stderr.contains("checksum mismatch"), "no record was served or kept half-written")
            print("after kill -9 during small fills: \(fromDisk) of \(paths.count) entries served from disk")
        }

        @Test func flippedByteAndTruncatedRecordAreDetectedAndRefetched() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let flipped = "/flip?size=50000&cc=max-age=600"
            let truncated = "/trunc?size=50000&cc=max-age=600"
            do {
                let larder = try Larder(cacheDirectory: cache)
                _ = try Curl.viaProxy(larder.proxy, [origin.url(flipped)])
                _ = try Curl.viaProxy(larder.proxy, [origin.url(truncated)])
                larder.stop()
            }
            // Both are small: records in a segment file (in one, or in two when two event loops
            // stored them), /flip's written before /trunc's.
            let files = try FileManager.default.subpathsOfDirectory(atPath: cache + "/v1").map { cache + "/v1/" + $0 }
                .filter { !FileSystemProbe.isDirectory($0) }
            #expect(!files.isEmpty && files.allSatisfy { $0.contains("/v1/seg/") })
            var damaged = 0
            for file in files {
                var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
                // Half-way into the 50,000-byte body that follows the record's key line.
                if let key = bytes.range(of: Data("key \(origin.url(flipped))\n".utf8)) {
                    bytes[key.upperBound + 25_000] ^= 0x40
                    damaged += 1
                }
                if let key = bytes.range(of: Data("key \(origin.url(truncated))\n".utf8)) {
                    bytes = bytes.prefix(key.upperBound + 25_000)  // a crash in the middle of the append
                    damaged += 1
                }
                try bytes.write(to: URL(fileURLWithPath: file))
            }
            #expect(damaged == 2)
            let larder = try Larder(cacheDirectory: cache)
            for path in [flipped, truncated] {
                let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(result.status == 200)
                #expect(try bodyMismatch(result.body, origin.directBody(path)) == nil)
                #expect(try origin.count(path) == 3, "\(path): fill, refetch after corruption, direct")
            }
            let log = larder.child.stderr
            #expect(log.contains("dropping corrupt disk cache entry"))
            #expect(log.contains("checksum mismatch"))
            #expect(log.contains("expected"))
        }

        @Test func evictionKeepsTheDiskTierUnderItsLimit() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[disk]\nmax_bytes = \"2MiB\"\n[memory]\nmax_bytes = \"1MiB\"\n")
            var sizes = [5_000, 300_000, 40_000, 700_000, 1_000, 250_000, 90_000, 400_000]
            sizes += sizes
            for (index, size) in sizes.enumerated() {
                #expect(try Curl.viaProxy(larder.proxy, [origin.url("/e\(index)?size=\(size)&cc=max-age=600")]).status == 200)
            }
            usleep(300_000)
            let total = larder.cacheFiles("v1").reduce(0) {
                $0 + ((try? FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0)
            }
            #expect(total <= 2 * 1024 * 1024)
            #expect(total > 0)
        }

        /// Runs `body` with a 1 MiB tmpfs mounted for it (a filesystem that fills up), then
        /// unmounts it. Root only: otherwise, or if the mount fails, `test` is skipped, saying why.
        static func withSmallTmpfs(_ test: String = #function, _ body: (String) throws -> Void) throws {
            guard getuid() == 0 else {
                print("skipped \(test): needs root to mount a small tmpfs")
                return
            }
            let mountPoint = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: mountPoint) }
            let mount = try ChildProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint])
            mount.process.waitUntilExit()
            guard mount.process.terminationStatus == 0 else {
                print("skipped \(test): mount failed: \(mount.stderr)")
                return
            }
            defer {
                let umount = try? ChildProcess("/bin/umount", ["-l", mountPoint])
                umount?.process.waitUntilExit()
            }
            try body(mountPoint)
        }

        @Test func fullFilesystemDegradesToMemoryWithoutClientErrors() throws {
            try Self.withSmallTmpfs { mountPoint in
                let origin = try Origin()
                let larder = try Larder(cacheDirectory: mountPoint + "/cache")
                for index in 0..<6 {
                    let path = "/full\(index)?size=400000&cc=max-age=600"
                    let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                    #expect(result.status == 200)
                    #expect(result.exitCode == 0)
                    #expect(try bodyMismatch(result.body, origin.directBody(path)) == nil)
                }
                // Memory still stores what the disk could not.
                #expect(try Curl.viaProxy(larder.proxy, [origin.url("/full5?size=400000&cc=max-age=600")]).cacheStatus?.isMemoryHit == true)
                try larder.child.waitForOutput { $0.contains("disk cache write failed; storing in memory only") }
                // Health says so while the tier refuses writes, as /stats and the gauge do.
                let health = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"])
                #expect(health.status == 503 && health.text.contains("refusing writes"), "\(health.text)")
                #expect(try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text.contains("\nlarder_disk_degraded 1"))
            }
        }

        /// While the disk refuses writes, a body too large for the memory tier is stored nowhere:
        /// not kept whole for a disk append that cannot happen, and not said to be stored.
        @Test func aSmallBodyIsNotSaidToBeStoredWhileTheDiskRefusesWrites() throws {
            try Self.withSmallTmpfs { mountPoint in
                let origin = try Origin()
                let larder = try Larder(config: "[memory]\nmax_object_bytes = \"1KiB\"\n", cacheDirectory: mountPoint + "/cache")
                for index in 0..<4 {
                    #expect(try Curl.viaProxy(larder.proxy, [origin.url("/fill\(index)?size=400000&cc=max-age=600")]).status == 200)
                }
                try larder.child.waitForOutput { $0.contains("disk cache write failed; storing in memory only") }
                // Declared, and chunked: of unknown length when the head goes to the client, so
                // `stored` there is a forecast (the body might have fitted the memory tier); either
                // way it is not stored.
                for (path, declared) in [("/small?size=3000&cc=max-age=600", true), ("/small?size=3000&chunked=1&cc=max-age=600", false)] {
                    let expected = try origin.directBody(path)
                    for _ in 0..<2 {
                        let result = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                        #expect(result.body == expected)
                        #expect(result.cacheStatus?.hit == false, "\(path): \(String(describing: result.cacheStatus))")
                        if declared { #expect(result.cacheStatus?.stored == false, "\(String(describing: result.cacheStatus))") }
                    }
                    #expect(try origin.count(path) == 3, "one direct request, then both through the proxy")
                }
            }
        }

        /// Entries written by a second implementation of the format (Benchmarks/make-disk-entries.py):
        /// 5,000 small files of the current format, 200 records of format 2 (an older Larder's)
        /// in a segment, and a large entry of each format: format 4's and the current one's
        /// blocks checked as they are sent (each with its format's checksums), the older ones (no
        /// block checksums) dropped, not counted as damage.
        @Test func manyEntriesOnDiskServeHitsWhileTheIndexRebuilds() throws {
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let runs: [[String]] = [
                [cache, "5000", "http://127.0.0.1:9/gen/"], ["--segments", "--format", "2", cache, "200", "http://127.0.0.1:9/old/"],
                ["--format", "2", cache, "1", "http://127.0.0.1:9/big2/", "1500000"],
                ["--format", "3", cache, "1", "http://127.0.0.1:9/big3/", "1500000"],
                ["--format", "4", cache, "1", "http://127.0.0.1:9/big4/", "2500000"],
                [cache, "1", "http://127.0.0.1:9/big5/", "2600000"],
            ]
            for arguments in runs {
                let generator = try ChildProcess("/usr/bin/env", ["python3", Paths.root + "/Benchmarks/make-disk-entries.py"] + arguments)
                generator.process.waitUntilExit()
                #expect(generator.process.terminationStatus == 0, "\(arguments)")
            }
            let larder = try Larder(cacheDirectory: cache)
            for (path, size) in [("gen/4999", 1024), ("gen/0", 1024), ("old/199", 1024), ("gen/2500", 1024), ("old/0", 1024)] {
                let result = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:9/" + path])
                #expect(result.status == 200, "\(path): port 9 has no origin, only the disk can answer")
                #expect(result.cacheStatus?.isDiskHit == true, "\(path)")
                #expect(result.body.count == size, "\(path)")
                let index = String(path.split(separator: "/")[1])
                #expect(result.body.prefix(index.count) == Data(index.utf8), "\(path)")
            }
            try larder.child.waitForOutput { $0.contains("disk cache index rebuilt") && $0.contains("entries=5204") }
            for (path, size) in [("big4/0", 2_500_000), ("big5/0", 2_600_000)] {
                let large = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:9/" + path])
                #expect(large.status == 200 && large.cacheStatus?.isDiskHit == true, "\(path)")
                #expect(large.body == Data(String(repeating: "0", count: size).utf8), "\(path)")
            }
            for path in ["big2/0", "big3/0"] {
                let old = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:9/" + path])
                #expect(old.status == 502, "\(path): dropped as an older format, so only the (absent) origin could answer")
            }
            #expect(try Self.corruptions(larder) == 0, "nothing read as damaged")
        }
    }
}

enum FileSystemProbe {
    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

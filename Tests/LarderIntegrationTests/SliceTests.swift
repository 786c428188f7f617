import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Big objects kept as slices (`cache.slice_size`, default 8 MiB): ranges and resumes from
    /// the cache, partial objects completed slice by slice, a changed object dropped whole,
    /// slice fills shared. Real curl against the real binary and an origin that honours Range
    /// and counts the body bytes it sends.
    @Suite(.timeLimit(.minutes(4))) struct Slices {
        static let size = 64 << 20
        static let slice = 8 << 20

        /// The origin's body for `/big` (its pattern: a 32-byte SHA-256 block repeated), cut to
        /// `range`.
        static func expected(_ path: String, id: String = "", version: Int = 0, range: ClosedRange<Int>? = nil) throws -> Data {
            let seed = path + "|" + id + (version == 0 ? "" : "|\(version)")
            let child = try ChildProcess(
                "/usr/bin/env", ["python3", "-c", "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())", seed])
            child.waitUntilExit()
            let hex = Array(child.stdout.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
            guard hex.count == 64 else { throw TestFailure("sha256 of \(seed): \(child.stderr)") }
            let block = (0..<32).map { index in UInt8(String(decoding: hex[(2 * index)..<(2 * index + 2)], as: UTF8.self), radix: 16)! }
            let bounds = range ?? 0...(size - 1)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(bounds.count + 64)
            for _ in 0...(bounds.count / 32 + 1) { bytes.append(contentsOf: block) }
            let start = bounds.lowerBound % 32
            return Data(bytes[start..<(start + bounds.count)])
        }

        /// The ranges the origin was asked for on `path`, in order.
        static func rangesAsked(_ origin: Origin, _ pathAndQuery: String) throws -> [String] {
            try origin.requests().filter { $0.target == pathAndQuery }.map { request in
                request.headers.first { $0.0.lowercased() == "range" }?.1 ?? "-"
            }
        }

        static func sliceRange(_ index: Int) -> String { "bytes=\(index * slice)-\((index + 1) * slice - 1)" }

        /// A Larder with 1 MiB slices, and the 3 MiB object at `target` fetched whole through it
        /// and stored as three slices (asserted); returns the Larder and the object's URL.
        static func objectInThreeSlices(_ origin: Origin, _ target: String) throws -> (larder: Larder, url: String) {
            let larder = try Larder(config: "[cache]\nslice_size = \"1MiB\"\n")
            let url = origin.url(target)
            #expect(try Curl.viaProxy(larder.proxy, [url], timeout: 60).body.count == 3 << 20)
            #expect(try sliceTiers(larder, url) { $0.count == 3 }.count == 3, "stored as three slices")
            return (larder, url)
        }

        /// `POST /purge?url=` of an object stored in slices removes the slices, which are
        /// stored under keys of their own: the next request goes to the origin.
        @Test func aPurgeOfTheObjectsURLRemovesItsSlices() throws {
            let origin = try Origin()
            let size = 3 << 20
            let target = "/big?size=\(size)&ranges=1&cc=max-age=3600"
            let (larder, url) = try Self.objectInThreeSlices(origin, target)
            #expect(try Curl.viaProxy(larder.proxy, [url]).cacheStatus?.hit == true)
            let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url
            let purge = try Curl.run(["-X", "POST", "http://127.0.0.1:\(larder.adminPort)/purge?url=\(encoded)"])
            #expect(purge.text.contains("\"purged\":true"), "\(purge.text)")
            let after = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(after.body.count == size && after.cacheStatus?.hit == false, "\(after.headers)")
            #expect(try origin.bytes(target) == 2 * size, "fetched whole again after the purge")
        }

        @Test func rangesAndAResumeOfA64MiBObjectComeFromItsSlices() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let target = "/big?size=\(Self.size)&ranges=1&cc=max-age=3600"
            let url = origin.url(target)
            let first = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(first.status == 200 && first.body.count == Self.size)
            #expect(bodyMismatch(first.body, try Self.expected("/big")) == nil)
            #expect(try origin.bytes(target) == Self.size, "one whole transfer")
            // The whole transfer was stored as eight slices (each finished as its last byte came).
            var listed: [String] = []
            for _ in 0..<100 {
                let answer = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/cache?prefix=\(url)"])
                let entries = (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["entries"] as? [[String: Any]] ?? []
                listed = entries.compactMap { $0["key"] as? String }
                if listed.count == 8 { break }
                usleep(50_000)
            }
            #expect(listed == (0..<8).map { url + "#slice=\($0)" })

            let part = try Curl.viaProxy(larder.proxy, ["-r", "10000000-20000000", url])
            #expect(part.status == 206)
            #expect(part.header("content-range") == "bytes 10000000-20000000/\(Self.size)")
            #expect(part.header("cache-status")?.contains("hit") == true, "\(part.header("cache-status") ?? "-")")
            #expect(bodyMismatch(part.body, try Self.expected("/big", range: 10_000_000...20_000_000)) == nil)

            let tail = try Curl.viaProxy(larder.proxy, ["-r", "-1000", url])
            #expect(tail.status == 206 && tail.header("content-range") == "bytes \(Self.size - 1000)-\(Self.size - 1)/\(Self.size)")
            #expect(bodyMismatch(tail.body, try Self.expected("/big", range: (Self.size - 1000)...(Self.size - 1))) == nil)

            let past = try Curl.viaProxy(larder.proxy, ["-r", "\(Self.size)-", url])
            #expect(past.status == 416 && past.header("content-range") == "bytes */\(Self.size)")

            // curl -C -: a download that stopped at 20,000,000 bytes, resumed.
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/big.part"
            try Self.expected("/big", range: 0...19_999_999).write(to: URL(fileURLWithPath: file))
            let resume = try ChildProcess(
                "/usr/bin/curl", ["-s", "-S", "--max-time", "60", "--proxy", larder.proxy, "-C", "-", "-o", file, url])
            resume.waitUntilExit()
            #expect(resume.terminationStatus == 0, "\(resume.stderr)")
            let resumed = try Data(contentsOf: URL(fileURLWithPath: file))
            let whole = try Self.expected("/big")
            #expect(resumed.count == Self.size && bodyMismatch(resumed, whole) == nil, "\(resumed.count) bytes")
            #expect(try origin.bytes(target) == Self.size, "ranges and the resume came from the cache")
            #expect(try origin.count(target) == 1)
        }

        @Test func aHalfCachedObjectFetchesOnlyItsMissingSlices() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let target = "/big?size=\(Self.size)&ranges=1&cc=max-age=3600"
            let url = origin.url(target)
            let half = try Curl.viaProxy(larder.proxy, ["-r", "0-\(Self.size / 2 - 1)", url], timeout: 60)
            #expect(half.status == 206 && half.body.count == Self.size / 2)
            #expect(try origin.bytes(target) == Self.size / 2)
            #expect(try Self.rangesAsked(origin, target) == (0..<4).map(Self.sliceRange))

            // only-if-cached (RFC 9111 §5.2.1.7): a range inside the stored half is answered; the
            // whole object is not all there, so 504 rather than a body cut short.
            let cachedPart = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "100-20000000", url])
            #expect(cachedPart.status == 206 && cachedPart.body.count == 20_000_000 - 99)
            let notAll = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", url])
            #expect(notAll.status == 504 && notAll.exitCode == 0)
            #expect(try origin.bytes(target) == Self.size / 2)

            let whole = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(whole.status == 200 && whole.header("content-length") == "\(Self.size)")
            #expect(bodyMismatch(whole.body, try Self.expected("/big")) == nil)
            #expect(whole.header("cache-status")?.contains("fwd=partial") == true, "\(whole.header("cache-status") ?? "-")")
            #expect(try origin.bytes(target) == Self.size, "only the missing half came from the origin")
            #expect(try Self.rangesAsked(origin, target) == (0..<8).map(Self.sliceRange))

            let again = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(again.header("cache-status")?.contains("hit") == true)
            #expect(try origin.bytes(target) == Self.size)
        }

        /// The tiers of each slice of `url` as `GET /cache` lists them, once `accept` takes them
        /// (polled for up to 5 s: promotions are read on the disk tier's reader thread).
        static func sliceTiers(_ larder: Larder, _ url: String, until accept: ([String]) -> Bool) throws -> [String] {
            var tiers: [String] = []
            for _ in 0..<100 {
                let answer = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/cache?prefix=\(url)"])
                let entries = (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["entries"] as? [[String: Any]] ?? []
                tiers = entries.compactMap { $0["tier"] as? String }
                if accept(tiers) { break }
                usleep(50_000)
            }
            return tiers
        }

        /// `memory.max_object_bytes` (16 MiB by default) bounds a sliced object as a whole: the
        /// slices of a 12 MiB object are promoted on their disk hits and later hits come from
        /// memory (`detail=slices`); those of a 20 MiB object stay on disk only.
        @Test func slicesOfAnObjectWithinTheMemoryLimitArePromoted() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let small = 12 << 20
            let target = "/big?size=\(small)&ranges=1&cc=max-age=3600&id=memory"
            let url = origin.url(target)
            #expect(try Curl.viaProxy(larder.proxy, [url], timeout: 60).status == 200)
            #expect(try Self.sliceTiers(larder, url) { $0.count == 2 } == ["disk", "disk"])
            let fromDisk = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(fromDisk.header("cache-status")?.contains("detail=disk-slices") == true, "\(fromDisk.header("cache-status") ?? "-")")
            #expect(try Self.sliceTiers(larder, url) { $0 == ["memory+disk", "memory+disk"] } == ["memory+disk", "memory+disk"])
            let fromMemory = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(fromMemory.status == 200 && fromMemory.header("content-length") == "\(small)")
            #expect(fromMemory.header("cache-status")?.contains("detail=slices") == true, "\(fromMemory.header("cache-status") ?? "-")")
            #expect(bodyMismatch(fromMemory.body, try Self.expected("/big", id: "memory", range: 0...(small - 1))) == nil)
            let part = try Curl.viaProxy(larder.proxy, ["-r", "8000000-9000000", url])
            #expect(part.status == 206)
            #expect(bodyMismatch(part.body, try Self.expected("/big", id: "memory", range: 8_000_000...9_000_000)) == nil)
            #expect(try origin.bytes(target) == small)

            let large = 20 << 20
            let largeTarget = "/big?size=\(large)&ranges=1&cc=max-age=3600&id=disk"
            let largeURL = origin.url(largeTarget)
            #expect(try Curl.viaProxy(larder.proxy, [largeURL], timeout: 60).status == 200)
            #expect(try Self.sliceTiers(larder, largeURL) { $0.count == 3 }.count == 3)
            for _ in 0..<2 {
                let hit = try Curl.viaProxy(larder.proxy, [largeURL], timeout: 60)
                #expect(hit.header("cache-status")?.contains("detail=disk-slices") == true, "\(hit.header("cache-status") ?? "-")")
                #expect(bodyMismatch(hit.body, try Self.expected("/big", id: "disk", range: 0...(large - 1))) == nil)
            }
            #expect(try Self.sliceTiers(larder, largeURL) { $0.contains { $0 != "disk" } } == ["disk", "disk", "disk"])
            #expect(try origin.bytes(largeTarget) == large)
        }

        /// Slices are disk entries like any other: a restart finds them, a prefix ban takes them
        /// with their object.
        @Test func slicesSurviveARestartAndGoWithABan() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let target = "/big?size=\(Self.size / 4)&ranges=1&cc=max-age=3600&id=restart"
            let url = origin.url(target)
            do {
                let larder = try Larder(cacheDirectory: cache)
                #expect(try Curl.viaProxy(larder.proxy, ["-r", "0-\(Self.size / 4 - 1)", url]).status == 206)
                #expect(larder.stop() == 0)
            }
            let restarted = try Larder(cacheDirectory: cache)
            let range = try Curl.viaProxy(restarted.proxy, ["-r", "9000000-9999999", url])
            #expect(range.status == 206 && range.header("cache-status")?.contains("hit") == true)
            #expect(bodyMismatch(range.body, try Self.expected("/big", id: "restart", range: 9_000_000...9_999_999)) == nil)
            #expect(try origin.bytes(target) == Self.size / 4)
            let ban = try Curl.run(["-X", "POST", "http://127.0.0.1:\(restarted.adminPort)/ban?prefix=\(url)"])
            let object = try JSONSerialization.jsonObject(with: ban.body) as? [String: Any]
            #expect(object?["banned"] as? Int == 2, "both slices: \(ban.text)")
            #expect(try Curl.viaProxy(restarted.proxy, ["-r", "9000000-9999999", url]).status == 206)
            #expect(try origin.bytes(target) == Self.size / 4 + Self.slice, "the slice came from the origin again")
        }

        @Test func aChangedETagDropsEverySlice() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let target = "/big?size=\(Self.size)&ranges=1&cc=max-age=3600"
            let url = origin.url(target)
            _ = try Curl.viaProxy(larder.proxy, ["-r", "0-\(Self.size / 2 - 1)", url], timeout: 60)
            try origin.bump("/big")
            // The first half is fresh in the cache; the fifth slice comes back with another
            // ETag. The answer's head is out, so it can only end short, and every slice goes.
            let mixed = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(mixed.exitCode == 18, "curl: transfer closed with data outstanding (\(mixed.exitCode))")
            #expect(mixed.body.count < Self.size)
            let listing = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/cache?prefix=\(url)%23slice=0"])
            #expect(!listing.text.contains("#slice=0"), "\(listing.text)")
            try larder.child.waitForOutput { $0.contains("dropped the slices of a changed object") }

            let fresh = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(fresh.status == 200 && fresh.header("etag")?.hasPrefix("\"v1-") == true)
            #expect(bodyMismatch(fresh.body, try Self.expected("/big", version: 1)) == nil)
        }

        /// Slices that must be revalidated are, one conditional range request each (304s, no
        /// body bytes); a first slice that comes back as another object drops the others before
        /// anything is sent, so the answer is the new object whole, not a mix.
        @Test func staleSlicesRevalidateAndANewVersionReplacesThemAll() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let target = "/big?size=\(Self.size / 2)&ranges=1&cc=no-cache"
            let url = origin.url(target)
            #expect(try Curl.viaProxy(larder.proxy, [url], timeout: 60).status == 200)
            #expect(try origin.bytes(target) == Self.size / 2)
            let again = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            let firstHalf = try Self.expected("/big", range: 0...(Self.size / 2 - 1))
            #expect(again.status == 200 && bodyMismatch(again.body, firstHalf) == nil)
            #expect(try origin.bytes(target) == Self.size / 2, "every slice confirmed by a 304")
            let conditional = try origin.requests().filter { $0.target == target }.dropFirst()
            #expect(conditional.count == 4)
            #expect(conditional.allSatisfy { request in request.headers.contains { $0.0.lowercased() == "if-none-match" } })

            try origin.bump("/big")
            let changed = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(changed.exitCode == 0 && changed.status == 200 && changed.header("etag")?.hasPrefix("\"v1-") == true)
            #expect(bodyMismatch(changed.body, try Self.expected("/big", version: 1, range: 0...(Self.size / 2 - 1))) == nil)
            #expect(try origin.bytes(target) == Self.size, "the new version once")
        }

        @Test func concurrentRangeRequestsShareOneFillPerSlice() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            // Slow enough (~0.6 s a slice) that the clients overlap.
            let target = "/big?size=\(Self.size)&ranges=1&cc=max-age=3600&slow=0.005"
            let url = origin.url(target)
            let clients = try (0..<6).map { _ in
                try ChildProcess(
                    "/usr/bin/curl",
                    [
                        "-s", "-S", "--max-time", "60", "--proxy", larder.proxy, "-r", "0-\(2 * Self.slice - 1)", "-o", "/dev/null", "-w",
                        "%{http_code}", url,
                    ])
            }
            for client in clients {
                client.waitUntilExit()
                #expect(client.stdout == "206", "\(client.stderr)")
            }
            #expect(try Self.rangesAsked(origin, target) == [Self.sliceRange(0), Self.sliceRange(1)], "one fill per slice")
            #expect(try origin.bytes(target) == 2 * Self.slice)
        }

        /// A slice request's 416 (or any answer that is not the slice) says nothing about the
        /// object: it must not be stored under the object's key, however cacheable it looks.
        @Test func aRangePastTheEndIsNotStoredAsTheObject() throws {
            let origin = try Origin()
            let larder = try Larder(config: "")
            let url = origin.url("/big?size=\(Self.size / 8)&ranges=1&cc=max-age=3600&id=past")
            let past = try Curl.viaProxy(larder.proxy, ["-r", "\(Self.size)-", url])
            #expect(past.status == 416)
            let whole = try Curl.viaProxy(larder.proxy, [url])
            #expect(whole.status == 200 && whole.body.count == Self.size / 8)
        }

        /// Clients that ask for the whole object while its one transfer is writing the slices
        /// join that transfer (on whichever loop runs it), rather than fetching the slices the
        /// transfer has not written yet.
        @Test func wholeDownloadsDuringTheFirstShareItsTransfer() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 2\n")
            let target = "/big?size=\(Self.size / 2)&ranges=1&cc=max-age=3600&slow=0.004"
            let url = origin.url(target)
            let clients = try (0..<6).map { index in
                // Later clients arrive once the first slices are stored, on either loop.
                usleep(index == 0 ? 0 : 250_000)
                return try ChildProcess(
                    "/usr/bin/curl",
                    [
                        "-s", "-S", "--max-time", "60", "--proxy", larder.proxy, "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                        url,
                    ])
            }
            for client in clients {
                client.waitUntilExit()
                #expect(client.stdout == "200 \(Self.size / 2)", "\(client.stderr)")
            }
            #expect(try Self.rangesAsked(origin, target) == ["-"], "one transfer, no slice requests")
        }

        /// A client sharing a slice fill whose head is slow goes on alone after
        /// `coalesce.wait_timeout`, as for any fill, and both answers are whole.
        @Test func aSliceWaiterThatTimesOutFetchesAlone() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nworkers = 1\n[coalesce]\nwait_timeout = \"300ms\"\n")
            let target = "/big?size=\(Self.size / 8)&ranges=1&cc=max-age=3600&delay=1.5"
            let url = origin.url(target)
            let clients = try (0..<2).map { index in
                if index == 1 { usleep(200_000) }
                return try ChildProcess(
                    "/usr/bin/curl",
                    [
                        "-s", "-S", "--max-time", "30", "--proxy", larder.proxy, "-r", "100-199", "-o", "/dev/null", "-w", "%{http_code}",
                        url,
                    ])
            }
            for client in clients {
                client.waitUntilExit()
                #expect(client.stdout == "206", "\(client.stderr)")
            }
            #expect(try origin.count(target) == 2, "the waiter fetched its slice itself")
            #expect(try larder.stats().coalescing.timedOut == 1)
        }

        @Test func slicingOffStoresBigObjectsWhole() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\nslice_size = \"0\"\n")
            let target = "/big?size=\(Self.size / 4)&ranges=1&cc=max-age=3600"
            let url = origin.url(target)
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            var listed = ""
            for _ in 0..<100 {
                listed = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/cache?prefix=\(url)"]).text
                if listed.contains("\"key\"") { break }
                usleep(50_000)
            }
            #expect(listed.contains("\"bytes\"") && !listed.contains("#slice="), "\(listed)")
        }
    }
}

import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// What is stored of an object in slices when the object changes or is invalidated: an
    /// unsafe request, a purge during its fill, a ban by glob, a newer version fetched whole.
    /// Real curl against the real binary and an origin that honours Range and makes new
    /// versions (`/_bump`).
    @Suite(.timeLimit(.minutes(4))) struct SliceVersions {
        /// RFC 9111 §4.4: a successful POST to an object's URL invalidates what is stored for it,
        /// its slices (stored responses of the same URI under keys of their own) included.
        @Test func aPostToAnObjectStoredInSlicesInvalidatesTheSlices() throws {
            let origin = try Origin()
            let size = 3 << 20
            let (larder, url) = try Slices.objectInThreeSlices(origin, "/big?size=\(size)&ranges=1&cc=max-age=3600")
            let post = try Curl.viaProxy(larder.proxy, ["--data-binary", "x", url])
            #expect(post.status == 200)
            #expect(try Slices.sliceTiers(larder, url) { $0.isEmpty }.isEmpty, "no slice left")
            let after = try Curl.viaProxy(larder.proxy, ["-r", "\(size - 1000)-\(size - 1)", url])
            #expect(after.status == 206 && after.cacheStatus?.hit == false, "\(after.headers)")
        }

        /// A purge while a fill stores an object in slices: the slices it fetched before the
        /// purge and finishes after it are not stored, or the old version would be served as
        /// hits after the operator purged it (and a range across old and new slices cut short).
        @Test func slicesAFillFinishesAfterAPurgeAreNotStored() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\nslice_size = \"1MiB\"\n")
            let size = 4 << 20
            // 64 pieces of 64 KiB, 40 ms apart: the fill takes about 2.6 s.
            let target = "/big?size=\(size)&ranges=1&cc=max-age=3600&slow=0.04"
            let url = origin.url(target)
            let download = try ChildProcess(
                "/usr/bin/curl",
                ["-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "--max-time", "60", "-x", larder.proxy, url])
            defer { download.kill() }
            #expect(try Slices.sliceTiers(larder, url) { !$0.isEmpty }.count == 1, "the first slice stored: the fill is under way")
            try origin.bump("/big")
            let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url
            let purge = try Curl.run(["-X", "POST", "http://127.0.0.1:\(larder.adminPort)/purge?url=\(encoded)"])
            #expect(purge.text.contains("\"purged\":true"), "\(purge.text)")
            download.waitUntilExit()
            #expect(download.stdout == "200 \(size)", "the client in flight gets the object it asked for")
            var stored: [String] = []
            for _ in 0..<20 {
                stored = try Slices.sliceTiers(larder, url) { _ in true }
                if !stored.isEmpty { break }
                usleep(50_000)
            }
            #expect(stored.isEmpty, "no slice of the purged version stored after the purge")
            let tail = try Curl.viaProxy(larder.proxy, ["-r", "\(size - 1000)-\(size - 1)", url])
            let direct = try Curl.run(["-r", "\(size - 1000)-\(size - 1)", url])
            #expect(tail.status == 206 && tail.cacheStatus?.hit == false, "\(tail.headers)")
            #expect(bodyMismatch(tail.body, direct.body) == nil, "the origin's new version")
        }

        /// Review 113's fourth finding: stale slices validated by an origin that answers 304
        /// with the new version's ETag (RFC 9111 §4.3.4: it updates nothing) are fetched again,
        /// and the walk, seeing another object, replaces them all: the client gets the new
        /// version whole (the walk used to cut it short after the first slice).
        @Test func staleSlicesAnswered304WithTheNewVersionsTagAreReplacedWhole() throws {
            let origin = try Origin()
            let size = 3 << 20
            let target = "/lie/object.bin?size=\(size)&ranges=1&cc=max-age=3&lie304=1"
            let (larder, url) = try Slices.objectInThreeSlices(origin, target)
            usleep(3_200_000)  // every slice stale
            // Slices 1 and 2 validated (the same version yet: a true 304), fresh again; 0 stays stale.
            for slice in 1...2 {
                let first = slice << 20
                let part = try Curl.viaProxy(larder.proxy, ["-r", "\(first)-\(first + 99)", url])
                #expect(part.status == 206 && part.cacheStatus?.fwd == "stale", "\(part.headers)")
            }
            try origin.bump("/lie/object.bin")
            let whole = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            let direct = try Curl.run([url])
            #expect(whole.status == 200 && whole.body.count == size, "\(whole.headers)")
            #expect(bodyMismatch(whole.body, direct.body) == nil, "the new version, whole")
            #expect(whole.header("etag") == direct.header("etag"))
        }

        /// A ban's glob is matched against an object's URL for its slices too (their keys end
        /// in `#slice=N`): a glob ending in the URL's own text bans the slices with the object.
        @Test func aGlobBanEndingInTheURLsTextCoversItsSlices() throws {
            let origin = try Origin()
            let size = 3 << 20
            let (larder, url) = try Slices.objectInThreeSlices(origin, "/g/object.bin?size=\(size)&ranges=1&cc=max-age=600")
            let glob = (origin.url("/g/*.bin?*max-age=600")).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let ban = try Curl.run(["-X", "POST", "http://127.0.0.1:\(larder.adminPort)/ban?glob=\(glob)"])
            #expect(ban.text.contains("\"banned\":3"), "\(ban.text)")
            #expect(try Slices.sliceTiers(larder, url) { $0.isEmpty }.isEmpty)
            let after = try Curl.viaProxy(larder.proxy, ["-r", "\(size - 1000)-\(size - 1)", url])
            #expect(after.status == 206 && after.cacheStatus?.hit == false, "\(after.headers)")
        }

        /// Slices of an older version promoted to memory never answer beside a newer version's:
        /// a whole fill stored in slices drops the object's older slices from both tiers, so the
        /// next whole hit is the new version, whole (it used to end where the old slice began).
        @Test func aWholeFillStoredInSlicesDropsOlderSlicesFromMemory() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\nslice_size = \"1MiB\"\n")
            let size = 4 << 20
            let url = origin.url("/mixed?size=\(size)&ranges=1&cc=max-age=600")
            let ranged = try Curl.viaProxy(larder.proxy, ["-r", "\(2 << 20)-\((4 << 20) - 1)", url], timeout: 60)
            #expect(ranged.status == 206 && ranged.body.count == 2 << 20)
            #expect(try Slices.sliceTiers(larder, url) { $0.count == 2 }.count == 2, "slices 2 and 3 stored")
            try origin.bump("/mixed")
            // A hit in slice 3 (fresh, the old version) promotes it to memory.
            #expect(try Curl.viaProxy(larder.proxy, ["-r", "\(3 << 20)-\((3 << 20) + 99)", url]).cacheStatus?.hit == true)
            #expect(try Slices.sliceTiers(larder, url) { $0.contains("memory+disk") }.contains("memory+disk"))
            let whole = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(whole.status == 200 && whole.cacheStatus?.hit == false)
            #expect(try Slices.sliceTiers(larder, url) { $0.count == 4 }.count == 4, "the new version stored in four slices")
            let direct = try Curl.run([url], timeout: 60)
            let again = try Curl.viaProxy(larder.proxy, [url], timeout: 60)
            #expect(again.status == 200 && again.cacheStatus?.hit == true, "\(again.headers)")
            #expect(again.body.count == size, "whole: \(again.body.count) bytes")
            #expect(bodyMismatch(again.body, direct.body) == nil, "the new version")
        }
    }
}

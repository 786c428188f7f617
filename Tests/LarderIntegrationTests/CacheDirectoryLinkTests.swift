import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Review 79 B1, B2: names planted in the cache directory (a damaged disk, another account
    /// that can write there, an operator's symbolic link onto shared storage). Larder removes,
    /// truncates and writes in its own files only: a link is removed, never followed, and a FIFO
    /// where an entry belongs never blocks a thread.
    @Suite(.timeLimit(.minutes(2))) struct CacheDirectoryLinks {
        /// A directory outside the cache holding `file` and `sub/file`.
        static func victim(_ root: String, _ name: String) throws -> String {
            let path = root + "/" + name
            try FileManager.default.createDirectory(atPath: path + "/sub", withIntermediateDirectories: true)
            try "keep \(name)\n".write(toFile: path + "/file", atomically: true, encoding: .utf8)
            try "keep \(name) too\n".write(toFile: path + "/sub/file", atomically: true, encoding: .utf8)
            return path
        }

        static func intact(_ victim: String) -> Bool {
            let name = (victim as NSString).lastPathComponent
            return (try? String(contentsOfFile: victim + "/file", encoding: .utf8)) == "keep \(name)\n"
                && (try? String(contentsOfFile: victim + "/sub/file", encoding: .utf8)) == "keep \(name) too\n"
        }

        static func waitForTheIndex(_ larder: Larder) throws -> Bool {
            for _ in 0..<100 {
                if try larder.stats().disk?.indexComplete == true { return true }
                usleep(100_000)
            }
            return false
        }

        /// Before: the trash link's target was emptied at start-up, the segment link's target
        /// truncated to nothing, the scan blocked in `open` on the FIFO for good (the index never
        /// complete), and a link inside `v1/` had its target emptied by `DELETE /cache`.
        @Test func plantedLinksAreRemovedNotFollowedAndAFIFOBlocksNothing() throws {
            let origin = try Origin()
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            let cache = root + "/cache"
            let path = "/kept?size=3000&cc=max-age=600"
            do {
                let first = try Larder(config: IntegrationTests.DiskTier.diskOnly, cacheDirectory: cache)
                #expect(try Curl.viaProxy(first.proxy, [origin.url(path)]).status == 200)
                #expect(first.stop() == 0)
            }
            let trashVictim = try Self.victim(root, "trash-target")
            symlink(trashVictim, cache + "/trash-99-1")
            let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: cache + "/v1/seg").sorted().first)
            let segmentVictim = root + "/segment-target"
            try "keep segment-target\n".write(toFile: segmentVictim, atomically: true, encoding: .utf8)
            try FileManager.default.removeItem(atPath: cache + "/v1/seg/" + segment)
            symlink(segmentVictim, cache + "/v1/seg/" + segment)
            try FileManager.default.createDirectory(atPath: cache + "/v1/00/00", withIntermediateDirectories: true)
            let fifo = cache + "/v1/00/00/0000" + String(repeating: "a", count: 28)
            #expect(mkfifo(fifo, 0o600) == 0)

            let larder = try Larder(config: IntegrationTests.DiskTier.diskOnly, cacheDirectory: cache)
            #expect(try Self.waitForTheIndex(larder), "the scan went past the FIFO")
            #expect(Self.intact(trashVictim), "the trash link's target is left whole")
            #expect(
                (try? String(contentsOfFile: segmentVictim, encoding: .utf8)) == "keep segment-target\n",
                "the segment link's target is not cut")
            #expect(!FileManager.default.fileExists(atPath: cache + "/trash-99-1"), "the link itself is gone")
            // The entry whose segment was replaced is fetched again, and stored again.
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
            #expect(try origin.count(path) == 2)

            let clearVictim = try Self.victim(root, "clear-target")
            symlink(clearVictim, cache + "/v1/zz")
            #expect(try Curl.run(["-X", "DELETE", "http://127.0.0.1:\(larder.adminPort)/cache"]).status == 200)
            larder.child.stop()
            #expect(Self.intact(clearVictim), "clearing the cache removed the link, not its target")
            #expect(Self.intact(trashVictim))
        }

        /// Review 81 N4: a link in place of `v1/` is refused before anything in the directory it
        /// names is touched (a `seg` link there was removed first).
        @Test func aLinkInPlaceOfV1IsRefusedBeforeAnythingInItIsTouched() throws {
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            let cache = root + "/cache"
            try FileManager.default.createDirectory(atPath: cache + "/tmp", withIntermediateDirectories: true)
            let victim = try Self.victim(root, "v1-target")
            #expect(symlink(root + "/elsewhere", victim + "/seg") == 0)
            #expect(symlink(victim, cache + "/v1") == 0)
            let larder = try Larder(config: "[disk]\nrequired = false\n", cacheDirectory: cache)
            let health = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"])
            #expect(health.status == 503 && health.text.contains(cache + "/v1"), "\(health.text)")
            larder.child.stop()
            #expect(Self.intact(victim))
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: victim + "/seg")) == root + "/elsewhere")
        }

        /// Review 80 F1, F5: a hard link at a segment's name (to a file elsewhere, or a
        /// snapshot's copy) had that file cut to nothing at start-up; a dangling link stayed and
        /// was complained of at every start; a link in place of `seg/` made new segments collide
        /// with the files of the directory it named (the disk tier refused writes).
        @Test func aHardLinkAtASegmentAndALinkedSegmentDirectoryAreNotWrittenThrough() throws {
            let origin = try Origin()
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            let cache = root + "/cache"
            do {
                let first = try Larder(config: IntegrationTests.DiskTier.diskOnly, cacheDirectory: cache)
                #expect(try Curl.viaProxy(first.proxy, [origin.url("/first?size=3000&cc=max-age=600")]).status == 200)
                #expect(first.stop() == 0)
            }
            let outside = root + "/outside"
            try "keep outside\n".write(toFile: outside, atomically: true, encoding: .utf8)
            let segments = cache + "/v1/seg/"
            #expect(link(outside, segments + "000000f0") == 0)
            #expect(symlink(root + "/nothing-here", segments + "000000f1") == 0)
            let restart = try Larder(config: IntegrationTests.DiskTier.diskOnly, cacheDirectory: cache)
            #expect(try Self.waitForTheIndex(restart))
            #expect((try? String(contentsOfFile: outside, encoding: .utf8)) == "keep outside\n", "the other name's file is whole")
            #expect(!FileManager.default.fileExists(atPath: segments + "000000f0"))
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: segments + "000000f1")) == nil, "the dangling link went")
            #expect(restart.stop() == 0)

            // seg/ itself a link to a directory holding a file of a segment's name.
            let elsewhere = try Self.victim(root, "segment-directory")
            try "keep this one\n".write(toFile: elsewhere + "/00000001", atomically: true, encoding: .utf8)
            try FileManager.default.removeItem(atPath: cache + "/v1/seg")
            #expect(symlink(elsewhere, cache + "/v1/seg") == 0)
            let linked = try Larder(config: IntegrationTests.DiskTier.diskOnly, cacheDirectory: cache)
            #expect(try Self.waitForTheIndex(linked))
            let url = origin.url("/after?size=3000&cc=max-age=600")
            #expect(try Curl.viaProxy(linked.proxy, [url]).status == 200)
            #expect(try Curl.viaProxy(linked.proxy, [url]).cacheStatus?.detail == "disk", "stored in a segment of its own")
            #expect(try linked.stats().disk?.degraded == false)
            linked.child.stop()
            #expect(Self.intact(elsewhere))
            #expect((try? String(contentsOfFile: elsewhere + "/00000001", encoding: .utf8)) == "keep this one\n")
        }

        /// `tmp/` is emptied at every start: a link in its place (onto a shared directory) is
        /// refused, with its reason, and nothing it names is touched.
        @Test func aLinkInPlaceOfTmpIsRefusedAndWhatItNamesIsLeft() throws {
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            let cache = root + "/cache"
            try FileManager.default.createDirectory(atPath: cache + "/v1", withIntermediateDirectories: true)
            let victim = try Self.victim(root, "tmp-target")
            symlink(victim, cache + "/tmp")
            let larder = try Larder(config: "[disk]\nrequired = false\n", cacheDirectory: cache)
            let health = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"])
            #expect(health.status == 503)
            #expect(health.text.contains(cache + "/tmp") && health.text.contains("symbolic link"), "\(health.text)")
            usleep(300_000)
            larder.child.stop()
            #expect(Self.intact(victim))
        }
    }
}

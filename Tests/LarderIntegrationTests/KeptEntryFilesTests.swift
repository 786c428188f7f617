import Foundation
import Glibc
import Testing

extension IntegrationTests.DiskTier {
    /// Entry files the daemon keeps open for its loops: removed by hand, they stop holding
    /// their disk space within seconds though nobody asks for their URLs again.
    @Test func entryFilesRemovedByHandAreLetGoWithinSeconds() throws {
        let origin = try Origin()
        let cache = Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let larder = try Larder(config: Self.diskOnly, cacheDirectory: cache)
        let paths = (0..<4).map { "/kept\($0)?size=3000000&cc=max-age=600" }
        for path in paths {
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200)
            // The file is written on the writer thread after the response: a disk hit once it is.
            var detail: String?
            for _ in 0..<50 where detail != "disk" {
                detail = try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.detail
                if detail != "disk" { usleep(100_000) }
            }
            #expect(detail == "disk", "\(path)")
        }
        let files = larder.cacheFiles("v1").filter { !$0.contains("/seg/") }
        #expect(files.count == 4)
        for file in files { try FileManager.default.removeItem(atPath: file) }
        let pid = larder.child.processIdentifier
        func deletedButOpen() -> Int {
            let directory = "/proc/\(pid)/fd"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return names.filter { name in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + name))?.hasSuffix("(deleted)") == true
            }.count
        }
        #expect(deletedButOpen() == 4, "kept open for the loops")
        var left = 4
        for _ in 0..<80 where left > 0 {
            usleep(100_000)
            left = deletedButOpen()
        }
        #expect(left == 0, "let go by the housekeeping every 5 s")
        let again = try Curl.viaProxy(larder.proxy, [origin.url(paths[0])])
        let expected = try origin.directBody(paths[0])
        #expect(again.status == 200 && again.body == expected)
        #expect(try Self.corruptions(larder) == 0, "removed by hand is gone, not damaged")
    }
}

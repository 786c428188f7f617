import Foundation
import Testing

extension IntegrationTests {
    /// Route keys end to end: a mirror pair shares one entry, a re-signed URL is a hit, the
    /// key shows in Cache-Status and the access log, and purging a URL finds its entry.
    @Suite(.timeLimit(.minutes(2))) struct CacheKeys {
        @Test func mirrorsShareAnEntryAndReSignedURLsHit() throws {
            let origin = try Origin()
            let config = """
                [[route]]
                match = "http://127.0.0.1:*/mirror/*"
                immutable = true
                key = "mirror:{path}"

                [[route]]
                match = "http://localhost:*/mirror/*"
                immutable = true
                key = "mirror:{path}"

                [[route]]
                match = "http://*:*/blob/*"
                immutable = true
                ignore_query = ["X-Amz-*", "Expires"]
                """
            let larder = try Larder(config: config)
            // Two spellings of one origin stand for two mirrors (the destination policy lets a
            // local client reach either).
            let first = try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(origin.port)/mirror/pool/a.deb?size=5000&cc=no-cache"])
            let second = try Curl.viaProxy(larder.proxy, ["http://localhost:\(origin.port)/mirror/pool/a.deb?size=5000&cc=no-cache"])
            #expect(first.status == 200 && second.status == 200 && first.body == second.body)
            #expect(second.header("cache-status")?.hasPrefix("larder; hit") == true, "\(second.headers)")
            #expect(second.header("cache-status")?.contains("key=\"mirror:/mirror/pool/a.deb\"") == true, "\(second.headers)")
            #expect(try origin.total() == 1, "immutable: no-cache or not, one fetch for both mirrors")

            let signed = { (signature: String) in
                origin.url("/blob/sha256-ab?size=3000&X-Amz-Signature=\(signature)&X-Amz-Date=2026&Expires=60")
            }
            #expect(try Curl.viaProxy(larder.proxy, [signed("one")]).status == 200)
            let resigned = try Curl.viaProxy(larder.proxy, [signed("two")])
            #expect(resigned.header("cache-status")?.hasPrefix("larder; hit") == true, "\(resigned.headers)")
            #expect(try origin.count("/blob/sha256-ab?size=3000&X-Amz-Signature=two&X-Amz-Date=2026&Expires=60") == 0)
            try larder.child.waitForOutput(stream: \.stdout) { $0.contains("key=\"mirror:/mirror/pool/a.deb\"") }

            // Purging by URL finds the entry the route keyed its own way.
            let purge = try Curl.run(
                [
                    "-X", "POST",
                    "http://127.0.0.1:\(larder.adminPort)/purge?url=http%3A%2F%2Flocalhost%3A\(origin.port)%2Fmirror%2Fpool%2Fa.deb",
                ])
            #expect(purge.text.contains("\"purged\":true"), "\(purge.text)")
            #expect(try Curl.viaProxy(larder.proxy, ["http://127.0.0.1:\(origin.port)/mirror/pool/a.deb?size=5000"]).status == 200)
            #expect(try origin.total() == 3, "fetched again after the purge")
        }
    }
}

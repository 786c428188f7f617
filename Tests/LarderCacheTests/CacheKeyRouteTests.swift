import LarderCache
import LarderConfig
import LarderHTTP
import Testing

/// Keys a route builds otherwise than from the URL (Squid's Store-ID).
@Suite struct CacheKeyRouteTests {
    private func route(_ text: String) throws -> Route {
        try #require(try ConfigLoader.parse("[[route]]\n" + text, file: "t.toml").get().routes.first)
    }

    @Test func aTemplateMergesMirrorsAndKeepsTheQueryWhenAsked() throws {
        // One route per mirror, each with the same key (a host-free key needs a named host).
        let mirror = { (host: String) in try self.route("match = \"http://\(host)/debian/*\"\nimmutable = true\nkey = \"debian:{path}\"") }
        let a = CacheKey(try AbsoluteURL(parsing: "http://deb.debian.org/debian/pool/main/a/a_1.deb"), route: try mirror("deb.debian.org"))
        let b = CacheKey(
            try AbsoluteURL(parsing: "http://ftp.de.debian.org:8080/debian/pool/main/a/a_1.deb?x=1"),
            route: try mirror("ftp.de.debian.org:8080"))
        #expect(a == b && a.url == "debian:/debian/pool/main/a/a_1.deb")
        let everything = try route("match = \"http://a/*\"\nkey = \"{scheme}|{host}|{port}|{path}?{query}\"")
        #expect(
            CacheKey(try AbsoluteURL(parsing: "http://a/p%2f?q=1"), route: everything).url == "http|a|80|/p%2F?q=1", "escapes normalized")
    }

    @Test func namedCapturesOfTheMatchMergeMirrorsLaidOutDifferently() throws {
        let mirror = { (host: String) in
            try self.route("match = \"http://\(host)/{base}/pool/{file}\"\nimmutable = true\nkey = \"debian:{file}\"")
        }
        let mirrors = try mirror("mirror.example.net")
        let a = CacheKey(try AbsoluteURL(parsing: "http://deb.debian.org/debian/pool/main/a/a_1.deb"), route: try mirror("deb.debian.org"))
        let b = CacheKey(try AbsoluteURL(parsing: "http://mirror.example.net/pub/linux/debian/pool/main/a/a_1.deb"), route: mirrors)
        #expect(a == b && a.url == "debian:main/a/a_1.deb")
        #expect(
            mirrors.match.captures(in: "/pub/linux/debian/pool/main/a/a_1.deb") == ["base": "pub/linux/debian", "file": "main/a/a_1.deb"])
        #expect(mirrors.match.captures(in: "/no/match/here").isEmpty)
    }

    @Test func aDigestRouteKeysByTheDigestWhateverTheHostOrRepository() throws {
        let blobs = try route("match = \"*://*:*/v2/*/blobs/sha256:{digest}\"\ndigest = \"sha256\"")
        let hex = String(repeating: "0a", count: 32)
        let a = CacheKey(try AbsoluteURL(parsing: "https://ghcr.io/v2/team/app/blobs/sha256:\(hex)"), route: blobs)
        let b = CacheKey(try AbsoluteURL(parsing: "http://registry.example:5000/v2/library/base/blobs/sha256:\(hex)"), route: blobs)
        #expect(a == b && a.url == "sha256:\(hex)")
    }

    @Test func ignoredQueryParametersLeaveTheKeyAndTheRestKeepTheirOrder() throws {
        let signed = try route("match = \"https://blobs.example/*\"\nimmutable = true\nignore_query = [\"X-Amz-*\", \"se\"]")
        let one = try AbsoluteURL(parsing: "https://blobs.example/sha256/ab?X-Amz-Signature=1&v=2&se=10&X-Amz-Date=3&w=4")
        let two = try AbsoluteURL(parsing: "https://blobs.example/sha256/ab?x-amz-signature=9&v=2&se=99&w=4")
        #expect(CacheKey(one, route: signed) == CacheKey(two, route: signed), "names compared without case")
        #expect(CacheKey(one, route: signed).url == "https://blobs.example/sha256/ab?v=2&w=4")
        let bare = try AbsoluteURL(parsing: "https://blobs.example/sha256/ab?X-Amz-Signature=1")
        #expect(CacheKey(bare, route: signed).url == "https://blobs.example/sha256/ab", "no dangling ?")
        #expect(CacheKey(one, route: nil) == CacheKey(one), "no route: the URL")
    }
}

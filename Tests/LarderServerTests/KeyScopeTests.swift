import LarderConfig
import Testing

@testable import LarderServer

/// Which keys a URL prefix or glob names through the routes that store them.
@Suite struct KeyScopeTests {
    static let debian = RouteTable(Preset.debian.routes)
    static let hex = String(repeating: "ab", count: 32)

    @Test func aURLPrefixAlsoNamesTheKeyPrefixItsRouteBuildsAndSaysTheKeyIsShared() {
        let scope = KeyScope.resolve(.prefix("HTTP://Deb.Debian.org/debian/pool/main/%c3%a9/"), routes: Self.debian)
        #expect(scope.patterns == [.prefix("http://deb.debian.org/debian/pool/main/%C3%A9/"), .prefix("debian:/debian/pool/main/%C3%A9/")])
        #expect(scope.shared == ["debian:{path}"])
        #expect(scope.matches("debian:/debian/pool/main/%C3%A9/x.deb") && !scope.matches("debian:/debian/pool/main/other.deb"))
    }

    @Test func anotherHostsPrefixNeverReachesTheProjectsSharedKeys() {
        let scope = KeyScope.resolve(.prefix("http://ftp.xx.debian.org/debian/pool/"), routes: Self.debian)
        #expect(scope.patterns == [.prefix("http://ftp.xx.debian.org/debian/pool/")])
        #expect(!scope.matches("debian:/debian/pool/main/d/demo.deb"))
    }

    @Test func aDigestKeyIsReachedByItsWholeURLOnlyAndOtherwiseSaidNotCovered() {
        let prefix = KeyScope.resolve(.prefix("http://deb.debian.org/debian/dists/"), routes: Self.debian)
        #expect(!prefix.matches("sha256:\(Self.hex)") && prefix.notCovered.contains("sha256:{digest}"))
        let whole = KeyScope.resolve(.prefix("http://mirror.test/debian/dists/by-hash/SHA256/\(Self.hex)"), routes: Self.debian)
        #expect(whole.matches("sha256:\(Self.hex)") && !whole.matches("sha256:\(String(repeating: "cd", count: 32))"))
        #expect(!whole.notCovered.contains("sha256:{digest}"))
    }

    @Test func aURLGlobMapsItsPathIntoTheKeyAndAHostGlobStaysAsWritten() {
        let glob = KeyScope.resolve(.glob("http://deb.debian.org/debian/pool/*/hello_*.deb"), routes: Self.debian)
        #expect(glob.matches("debian:/debian/pool/main/h/hello_2.0_all.deb") && !glob.matches("debian:/debian/pool/main/h/other.deb"))
        let hosts = KeyScope.resolve(.glob("http://*.debian.org/debian/pool/*"), routes: Self.debian)
        #expect(hosts.patterns == [.glob("http://*.debian.org/debian/pool/*")] && !hosts.matches("debian:/debian/pool/a.deb"))
    }

    @Test func keyPatternsAndUnfinishedAuthoritiesAreTakenAsTheyAre() {
        #expect(KeyScope.resolve(.prefix("debian:/debian/"), routes: Self.debian).patterns == [.prefix("debian:/debian/")])
        #expect(KeyScope.resolve(.prefix("http://deb.deb"), routes: Self.debian).patterns == [.prefix("http://deb.deb")])
    }

    /// One route over a loopback origin's `/pool/`, keyed by `key`.
    static func pool(_ key: String) throws -> RouteTable {
        let text = "[[route]]\nmatch = \"http://127.0.0.1:19101/pool/*\"\nimmutable = true\nkey = \"\(key)\"\n"
        return RouteTable(try ConfigLoader.parse(text, file: "t.toml").get().routes)
    }

    /// Once the query starts the path is whole: the key holds that path and no longer one.
    @Test func aURLPrefixWithAQueryNamesItsPathWholeInTheKey() throws {
        let url = "http://127.0.0.1:19101/pool/a?x=1"
        let pathOnly = KeyScope.resolve(.prefix(url), routes: try Self.pool("pool:{path}"))
        #expect(pathOnly.matches("pool:/pool/a"))
        for other in ["pool:/pool/ab", "pool:/pool/a/b", "pool:/pool/abc"] { #expect(!pathOnly.matches(other), "\(other)") }
        let withQuery = KeyScope.resolve(.prefix(url), routes: try Self.pool("pool:{path}?{query}"))
        #expect(withQuery.matches("pool:/pool/a?x=1") && withQuery.matches("pool:/pool/a?x=12"))
        #expect(!withQuery.matches("pool:/pool/ab?x=1") && !withQuery.matches("pool:/pool/a/b?x=1"))
        // The query may go on, and the path after it could not be told from its tail.
        let queryFirst = KeyScope.resolve(.prefix(url), routes: try Self.pool("x?{query}:{path}"))
        #expect(!queryFirst.matches("x?x=1:/pool/ab") && !queryFirst.matches("x?x=1:/pool/a/b"))
        #expect(queryFirst.notCovered == ["x?{query}:{path}"])
        let glob = KeyScope.resolve(.glob("http://127.0.0.1:19101/pool/a?x=*"), routes: try Self.pool("pool:{path}"))
        #expect(glob.matches("pool:/pool/a") && !glob.matches("pool:/pool/ab"))
    }

    /// `http://host:port` (no slash) reaches the route-keyed entries as `http://host:port/` does,
    /// and still names what starts with the text itself.
    @Test func anAuthorityWithoutASlashReachesTheRoutesKeysToo() throws {
        let routes = try Self.pool("pool:{path}")
        let prefix = KeyScope.resolve(.prefix("HTTP://127.0.0.1:19101"), routes: routes)
        #expect(prefix.matches("pool:/pool/a") && prefix.matches("http://127.0.0.1:19101/pool/a"), "\(prefix)")
        #expect(!prefix.matches("http://127.0.0.1:19102/pool/a"))
        let glob = KeyScope.resolve(.glob("http://127.0.0.1:19101*"), routes: routes)
        #expect(glob.matches("pool:/pool/a") && glob.matches("http://127.0.0.1:19101/x"), "\(glob)")
        let elsewhere = KeyScope.resolve(.prefix("http://127.0.0.1:19102"), routes: routes)
        #expect(!elsewhere.matches("pool:/pool/a"))
    }
}

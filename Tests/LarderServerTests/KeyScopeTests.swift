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
}

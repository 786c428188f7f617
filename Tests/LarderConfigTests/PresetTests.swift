import LarderConfig
import Testing

@Suite struct PresetTests {
    /// What each preset's routes make of its ecosystem's URLs: artefacts immutable, indexes
    /// revalidated, everything else left to the defaults.
    @Test func everyPresetClassifiesItsArtefactsAndIndexes() throws {
        let all = Preset.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        let parsed = try config("[cache]\npresets = [\(all)]\n")
        let table = RouteTable(parsed.routes)
        func kind(_ text: String) throws -> String {
            let url = try #require(URLParts(text))
            guard let route = table.match(method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.path) else {
                return "default"
            }
            return route.immutable ? "artefact" : route.policy == .revalidate ? "index" : "other"
        }
        let expected: [(String, String)] = [
            ("http://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10_amd64.deb", "artefact"),
            ("http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0123abcd", "artefact"),
            ("http://deb.debian.org/debian/dists/bookworm/InRelease", "index"),
            ("http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/Packages.xz", "index"),
            ("https://archive.ubuntu.com/ubuntu/pool/main/c/curl/curl_8.5.0_amd64.deb", "artefact"),
            ("http://apt.example.org:8080/debian/pool/main/x/x_1.0_all.deb", "artefact"),
            ("https://files.pythonhosted.org/packages/ab/cd/ef0123/requests-2.31.0-py3-none-any.whl", "artefact"),
            ("https://pypi.org/simple/requests/", "index"),
            ("https://pypi.org/pypi/requests/json", "index"),
            ("https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz", "artefact"),
            ("https://registry.npmjs.org/@scope/pkg/-/pkg-1.0.0.tgz", "artefact"),
            ("https://registry.npmjs.org/left-pad", "index"),
            ("https://static.crates.io/crates/serde/serde-1.0.0.crate", "artefact"),
            ("https://crates.io/api/v1/crates/serde/1.0.0/download", "artefact"),
            ("https://index.crates.io/se/rd/serde", "index"),
            ("https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.zip", "artefact"),
            ("https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.mod", "artefact"),
            ("https://proxy.golang.org/golang.org/x/text/@v/list", "index"),
            ("https://proxy.golang.org/golang.org/x/text/@latest", "index"),
            ("https://registry-1.docker.io/v2/library/debian/blobs/sha256:0123abcd", "artefact"),
            ("https://registry-1.docker.io/v2/library/debian/manifests/sha256:0123abcd", "artefact"),
            ("https://registry-1.docker.io/v2/library/debian/manifests/bookworm", "index"),
            (
                "https://production.cloudflare.docker.com/registry-v2/docker/registry/v2/blobs/sha256/01/0123/data?X-Amz-Signature=1",
                "artefact"
            ),
            ("https://objects.githubusercontent.com/github-production-release-asset-2e65be/123/456?X-Amz-Signature=1", "artefact"),
            ("https://mirror.example.org/fedora/39/x86_64/os/Packages/c/curl-8.2.1-1.fc39.x86_64.rpm", "artefact"),
            ("https://mirror.example.org/fedora/39/x86_64/os/repodata/repomd.xml", "index"),
            ("https://mirror.example.org/fedora/39/x86_64/os/repodata/0123abcd-primary.xml.zst", "artefact"),
            ("https://example.org/index.html", "default"),
        ]
        for (url, want) in expected {
            #expect(try kind(url) == want, "\(url)")
        }
    }

    /// Every artefact route of every preset takes its packages, with or without a query, and no
    /// URL that only looks like one: a search, a name with more after the suffix, a suffix in
    /// the query. Those would otherwise be pinned as immutable.
    @Test func everyArtefactRouteTakesPackagesAndNothingThatOnlyLooksLikeOne() throws {
        let all = Preset.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        let parsed = try config("[cache]\npresets = [\(all)]\n")
        let table = RouteTable(parsed.routes)
        func route(_ text: String) throws -> Route? {
            let url = try #require(URLParts(text))
            return table.match(method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.path)
        }
        let packages = [
            "http://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10_amd64.deb",
            "http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0123abcd",
            "http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "http://ftp.de.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA512/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef?x=1",
            "http://ftp.debian.org/debian/pool/main/c/curl/curl_7.88.1-10_amd64.deb",
            "http://security.debian.org/debian-security/pool/updates/main/c/curl/curl_7.88.1-10+deb12u1_amd64.deb",
            "http://security.ubuntu.com/ubuntu/pool/main/c/curl/curl_8.5.0_amd64.deb",
            "http://ports.ubuntu.com/ubuntu-ports/pool/main/c/curl/curl_8.5.0_arm64.deb",
            "https://ghcr.io/v2/owner/image/blobs/sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "https://ghcr.io/v2/owner/image/manifests/sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef?x=1",
            "http://archive.ubuntu.com/ubuntu/dists/noble/main/binary-amd64/by-hash/SHA256/0123abcd",
            "http://archive.ubuntu.com/ubuntu/pool/main/c/curl/curl_8.5.0_amd64.deb",
            "http://apt.example.org/debian/dists/bookworm/main/by-hash/SHA256/0123abcd?x=1",
            "http://apt.example.org/debian/pool/main/x/x_1.0_all.deb?x=1",
            "http://apt.example.org/debian/pool/main/x/x_1.0_all.udeb",
            "http://apt.example.org/debian/pool/main/x/x_1.0.dsc",
            "http://apt.example.org/debian/pool/main/x/x_1.0.orig.tar.gz",
            "http://apt.example.org/debian/pool/main/x/x_1.0.orig.tar.xz",
            "http://apt.example.org/debian/pool/main/x/x_1.0.orig.tar.bz2",
            "http://apt.example.org/debian/pool/main/x/x_1.0.orig.tar.lzma",
            "http://apt.example.org/debian/pool/main/x/x_1.0.orig.tar.zst",
            "https://files.pythonhosted.org/packages/ab/cd/ef0123/requests-2.31.0.tar.gz",
            "http://pypi.example.org/packages/ab/cd/ef0123/requests-2.31.0-py3-none-any.whl?sig=1",
            "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
            "https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz",
            "http://npm.example.org/@scope/pkg/-/pkg-1.0.0.tgz?x=1",
            "https://static.crates.io/crates/serde/serde-1.0.0.crate",
            "https://crates.io/api/v1/crates/serde/1.0.0/download",
            "http://crates.example.org/crates/serde/serde-1.0.0.crate?x=1",
            "https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.zip",
            "https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.mod?x=1",
            "https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.info",
            "https://registry-1.docker.io/v2/library/debian/blobs/sha256:0123abcd",
            "https://registry-1.docker.io/v2/library/debian/manifests/sha256:0123abcd",
            "https://production.cloudflare.docker.com/registry-v2/docker/registry/v2/blobs/sha256/01/0123/data?X-Amz-Signature=1",
            "https://objects.githubusercontent.com/github-production-release-asset-2e65be/123/456?X-Amz-Signature=1",
            "https://release-assets.githubusercontent.com/github-production-release-asset/123/456?sig=1",
            "https://mirror.example.org/fedora/39/Packages/c/curl-8.2.1-1.fc39.x86_64.rpm",
            "https://mirror.example.org/fedora/39/Packages/c/curl-8.2.1-1.fc39.x86_64.rpm?mirror=1",
            "https://mirror.example.org/fedora/39/repodata/0123abcd-primary.xml.zst",
        ]
        var taken = Set<String>()
        for url in packages {
            let found = try route(url)
            #expect(found?.immutable == true, "\(url) is an artefact")
            if let found { taken.insert(found.match.text) }
        }
        let artefactRoutes = Set(parsed.routes.filter(\.immutable).map(\.match.text))
        #expect(artefactRoutes.subtracting(taken).isEmpty, "every artefact route is tried: \(artefactRoutes.subtracting(taken))")
        let lookAlikes = [
            "http://apt.example.org/search?q=/pool/x_1.0_all.deb",
            "http://apt.example.org/debian/pool/main/x/x_1.0_all.deb.html",
            "http://apt.example.org/debian/pool/main/x/x_1.0_all.debx/y",
            "http://apt.example.org/debian/pool/main/x/x.udeb.sig",
            "http://apt.example.org/debian/pool/main/x/x.dsc.asc",
            "http://apt.example.org/debian/pool/main/x/x.tar.gz.asc",
            "http://apt.example.org/debian/pool/main/x/x.tar.xz/readme",
            "http://apt.example.org/find?q=/dists/a/by-hash/SHA256/0",
            "http://pypi.example.org/packages/ab/cd/ef/a.whl.html",
            "http://pypi.example.org/search?q=/packages/a/b/c/d.whl",
            "http://npm.example.org/-/v1/search?text=a/-/b.tgz",
            "http://npm.example.org/a/-/b.tgz.sig",
            "https://registry.npmjs.org/-/v1/search?text=a/-/b.tgz",
            "http://crates.example.org/search?q=/crates/a.crate",
            "http://crates.example.org/crates/a.crate.sha256",
            "http://crates.example.org/api/v1/crates/a/1.0/downloads",
            "http://go.example.org/x/@v/v1.zip.sig",
            "http://go.example.org/x/@v/v1.info/extra",
            "http://go.example.org/search?q=x/@v/v1.mod",
            "http://registry.example.org/v2/search?q=/blobs/sha256:0",
            "http://registry.example.org/v2/search?q=/manifests/sha256:0",
            "http://storage.example.org/search?q=/blobs/sha256/0",
            "http://mirror.example.org/search?q=foo.rpm",
            "http://mirror.example.org/etc/x.rpmnew/y",
            "http://mirror.example.org/a.rpm.html",
            "http://mirror.example.org/search?q=/repodata/x",
        ]
        for url in lookAlikes {
            #expect(try route(url)?.immutable != true, "\(url) is not an artefact")
        }
    }

    @Test func operatorRoutesWinAndPresetsDeduplicateAndUnknownNamesAreRefused() throws {
        let parsed = try config(
            "[cache]\npresets = [\"debian\", \"ubuntu\", \"debian\"]\n[[route]]\nmatch = \"http://deb.debian.org/*\"\npolicy = \"network_only\"\n"
        )
        #expect(parsed.routes.first?.source == nil && parsed.routes.first?.policy == .networkOnly)
        #expect(Set(parsed.routes.map(\.match.text)).count == parsed.routes.count, "no pattern twice")
        #expect(parsed.routes.dropFirst().allSatisfy { $0.source?.hasPrefix("preset ") == true })
        #expect(errors("[cache]\npresets = [\"debain\"]\n").first?.message.contains("did you mean 'debian'") == true)
    }

    /// The debian and ubuntu presets share by-hash files by digest (any host), and pool files
    /// only among the project's own hosts; a mirror under the same domain keeps its own key.
    @Test func debianAndUbuntuMergeByDigestOrAcrossTheirOwnHostsOnly() throws {
        let parsed = try config("[cache]\npresets = [\"debian\", \"ubuntu\", \"oci\"]\n")
        let table = RouteTable(parsed.routes)
        func route(_ text: String) throws -> Route? {
            let url = try #require(URLParts(text))
            return table.match(method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.path)
        }
        let sha256 = String(repeating: "ab", count: 32)
        let sha512 = String(repeating: "cd", count: 64)
        #expect(try route("http://ftp.xx.debian.org/debian/dists/a/by-hash/SHA256/\(sha256)")?.key?.text == "sha256:{digest}")
        #expect(try route("http://mirror.example/ubuntu/dists/a/by-hash/SHA512/\(sha512)")?.digest == .sha512)
        let md5 = try #require(try route("http://deb.debian.org/debian/dists/a/by-hash/MD5Sum/0123456789abcdef0123456789abcdef"))
        #expect(md5.key == nil && md5.digest == nil, "MD5 does not pin a body: keyed by URL")
        for host in ["deb.debian.org", "ftp.debian.org", "security.debian.org"] {
            #expect(try route("http://\(host)/debian/pool/main/c/c.deb")?.key?.text == "debian:{path}", "\(host)")
        }
        for host in ["archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com"] {
            #expect(try route("https://\(host)/ubuntu/pool/main/c/c.deb")?.key?.text == "ubuntu:{path}", "\(host)")
        }
        for mirror in ["ftp.xx.debian.org", "xx.archive.ubuntu.com", "evil.example"] {
            let pool = try #require(try route("http://\(mirror)/debian/pool/main/c/c.deb"))
            #expect(pool.key == nil && pool.immutable, "\(mirror) keeps its own entries")
        }
        let blob = try #require(try route("https://ghcr.io/v2/a/b/blobs/sha256:\(sha256)"))
        #expect(blob.key?.text == "sha256:{digest}" && blob.digest == .sha256)
        #expect(try route("https://ghcr.io/v2/a/b/manifests/sha256:\(sha256)")?.key?.text == "oci-manifest:{host}:{port}:sha256:{digest}")
        for route in parsed.routes where route.key.map({ !$0.parts.contains(.host) }) == true {
            #expect(route.match.exactHost != nil || route.digest != nil, "\(route.match): host-free key on a wildcard host")
        }
    }
}

/// Scheme, host, port and path-and-query of an absolute URL, for route matching in tests.
private struct URLParts {
    let scheme: String
    let host: String
    let port: Int
    let path: String

    init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        scheme = String(text[..<colon])
        let rest = text[text.index(colon, offsetBy: 3)...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        path = slash == rest.endIndex ? "/" : String(rest[slash...])
        if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = Int(authority[authority.index(after: colon)...]) ?? 0
        } else {
            host = String(authority)
            port = scheme == "https" ? 443 : 80
        }
    }
}

/// Built-in knowledge of package ecosystems (`[cache] presets`): each expands to routes placed
/// after the file's own, so the operator's routes win. Two kinds of route:
///
/// - **artefacts**, which never change under their URL (a package file named by its version, a
///   blob named by its digest): `immutable = true`, kept while the disk allows whatever their
///   headers say, some with a key that merges mirrors or drops URL signatures;
/// - **indexes** (`InRelease`, `/simple/` pages, package documents, tag manifests): policy
///   `revalidate`, stored by the HTTP rules and revalidated with the origin before every use,
///   served stale only under `stale_if_error` when the origin fails. An index therefore never
///   names an artefact Larder does not have the index's version of, and since artefacts are
///   named by version or digest, Larder is never the cause of a hash mismatch.
///
/// Every route matches both `http://` and `https://` (HTTPS needs ``tlsHosts`` in
/// `tls.intercept`). Artefact suffixes end the path, with any query after (`*.whl?*`): a query
/// string does not hide a package file, and a URL that only mentions one (`/search?q=a.whl`,
/// `/a.whl.html`, `/a.rpmnew/x`) is not taken for it.
public enum Preset: String, Sendable, CaseIterable {
    case debian, ubuntu, pypi, npm, cargo, go, oci
    case githubReleases = "github-releases"
    case rpm

    /// One route of a preset.
    struct Rule {
        enum Kind { case artefact, index }
        let match: String
        let kind: Kind
        var key: String?
        var ignoreQuery: [String] = []
        /// The body is checked against the URL's `{digest}` (the key defaults to the digest).
        var digest: DigestAlgorithm?
    }

    /// The hosts a preset's project runs itself, whose pool files are one archive and share
    /// entries; other hosts under its domain are mirrors run by others.
    var officialHosts: [String] {
        switch self {
        case .debian: ["deb.debian.org", "ftp.debian.org", "security.debian.org"]
        case .ubuntu: ["archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com"]
        default: []
        }
    }

    /// Query parameters that sign short-lived storage URLs (S3, CloudFront, Azure blob SAS).
    static let signatureParameters = [
        "X-Amz-*", "Expires", "Signature", "Key-Pair-Id", "Policy", "se", "sig", "sp", "sv", "sr", "st", "skoid", "sktid", "skt", "ske",
        "sks", "skv", "jwt", "rscd", "rsct", "response-content-disposition", "response-content-type",
    ]

    var rules: [Rule] {
        switch self {
        case .debian, .ubuntu:
            // by-hash files are checked against the digest their URL names, so one entry serves
            // every host; pool files are shared only among the project's own hosts (a country
            // mirror under the same domain is run by a third party: it keeps entries of its own).
            return [
                Rule(match: "*://*:*/*/by-hash/SHA256/{digest}?*", kind: .artefact, digest: .sha256),
                Rule(match: "*://*:*/*/by-hash/SHA512/{digest}?*", kind: .artefact, digest: .sha512),
            ]
                + officialHosts.map { host in
                    Rule(match: "*://\(host)/*/pool/*", kind: .artefact, key: "\(rawValue):{path}")
                } + [
                    Rule(match: "*://*:*/*/by-hash/*?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.deb?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.udeb?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.dsc?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.tar.gz?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.tar.xz?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.tar.bz2?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.tar.lzma?*", kind: .artefact),
                    Rule(match: "*://*:*/*/pool/*.tar.zst?*", kind: .artefact),
                    Rule(match: "*://*:*/*/dists/*", kind: .index),
                ]
        case .pypi:
            return [
                Rule(match: "*://files.pythonhosted.org/packages/*", kind: .artefact),
                Rule(match: "*://*:*/packages/*/*/*/*.whl?*", kind: .artefact),
                Rule(match: "*://*:*/simple/*", kind: .index),
                Rule(match: "*://*:*/pypi/*/json", kind: .index),
            ]
        case .npm:
            // Named-host routes go before any-host ones (ConfigDecoder): each registry's
            // tarballs are listed before its documents.
            return ["registry.npmjs.org", "registry.yarnpkg.com"].flatMap { host in
                [Rule(match: "*://\(host)/*/-/*.tgz?*", kind: .artefact), Rule(match: "*://\(host)/*", kind: .index)]
            } + [Rule(match: "*://*:*/*/-/*.tgz?*", kind: .artefact)]
        case .cargo:
            return [
                Rule(match: "*://static.crates.io/crates/*", kind: .artefact),
                Rule(match: "*://*:*/api/v1/crates/*/download?*", kind: .artefact),
                Rule(match: "*://*:*/crates/*.crate?*", kind: .artefact),
                Rule(match: "*://index.crates.io/*", kind: .index),
            ]
        case .go:
            return [
                Rule(match: "*://*:*/*/@v/*.zip?*", kind: .artefact),
                Rule(match: "*://*:*/*/@v/*.mod?*", kind: .artefact),
                Rule(match: "*://*:*/*/@v/*.info?*", kind: .artefact),
                Rule(match: "*://*:*/*/@v/list", kind: .index),
                Rule(match: "*://*:*/*/@latest", kind: .index),
            ]
        case .oci:
            return [
                // Named by digest: one entry per digest whatever the registry or repository.
                // Manifests are checked too, but keyed per registry: their Content-Type tells
                // clients the schema, and one registry's must not answer another's clients.
                Rule(match: "*://*:*/v2/*/blobs/sha256:{digest}?*", kind: .artefact, digest: .sha256),
                Rule(
                    match: "*://*:*/v2/*/manifests/sha256:{digest}?*", kind: .artefact,
                    key: "oci-manifest:{host}:{port}:sha256:{digest}", digest: .sha256),
                Rule(match: "*://*:*/v2/*/blobs/sha256:*?*", kind: .artefact),
                Rule(match: "*://*:*/v2/*/manifests/sha256:*?*", kind: .artefact),
                // Registries redirect blob downloads to signed storage URLs named by digest.
                Rule(match: "*://*:*/*/blobs/sha256/*?*", kind: .artefact, ignoreQuery: Preset.signatureParameters),
                Rule(match: "*://*:*/v2/*/manifests/*", kind: .index),
                Rule(match: "*://*:*/v2/*/tags/list", kind: .index),
            ]
        case .githubReleases:
            return [
                Rule(
                    match: "*://objects.githubusercontent.com/github-production-release-asset-*", kind: .artefact,
                    ignoreQuery: Preset.signatureParameters),
                Rule(match: "*://release-assets.githubusercontent.com/*", kind: .artefact, ignoreQuery: Preset.signatureParameters),
            ]
        case .rpm:
            return [
                Rule(match: "*://*:*/*.rpm?*", kind: .artefact),
                Rule(match: "*://*:*/*/repodata/repomd.xml*", kind: .index),
                // Every other repodata file is named by its checksum (repomd.xml names them).
                Rule(match: "*://*:*/*/repodata/*?*", kind: .artefact),
            ]
        }
    }

    /// The HTTPS hosts whose CONNECTs must be intercepted for this ecosystem's usual servers
    /// to be cached (`check-config` suggests them).
    public var tlsHosts: [String] {
        switch self {
        case .debian: ["deb.debian.org", "security.debian.org"]
        case .ubuntu: ["archive.ubuntu.com", "security.ubuntu.com"]
        case .pypi: ["pypi.org", "files.pythonhosted.org"]
        case .npm: ["registry.npmjs.org"]
        case .cargo: ["index.crates.io", "static.crates.io", "crates.io"]
        case .go: ["proxy.golang.org"]
        case .oci: ["registry-1.docker.io", "production.cloudflare.docker.com", "ghcr.io", "pkg-containers.githubusercontent.com"]
        case .githubReleases: ["github.com", "objects.githubusercontent.com", "release-assets.githubusercontent.com"]
        case .rpm: []
        }
    }

    /// The routes this preset adds, each marked with where it came from.
    public var routes: [Route] {
        rules.map { rule in
            // The patterns above are written to parse; a failure is a bug caught by the tests.
            var route = Route(match: try! URLPattern(parsing: rule.match))
            route.source = "preset \(rawValue)"
            switch rule.kind {
            case .artefact:
                route.immutable = true
                route.policy = .cacheFirst
                route.ttl = .seconds(10 * 365 * 86_400)
                route.key = try! (rule.key ?? rule.digest.map { "\($0.rawValue):{\(Route.digestCapture)}" }).map {
                    try KeyTemplate(parsing: $0)
                }
                route.ignoreQuery = rule.ignoreQuery
                route.digest = rule.digest
            case .index:
                route.policy = .revalidate
            }
            return route
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// `[cache] presets` end to end, against a local origin laid out like PyPI and a Debian
    /// mirror: artefacts kept whatever their headers say, indexes revalidated every time and
    /// served stale only when the origin fails.
    @Suite(.timeLimit(.minutes(2))) struct Presets {
        @Test func artefactsAreKeptAndIndexesRevalidatedOrServedStaleOnError() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\npresets = [\"pypi\", \"debian\"]\n")
            // Indexes: a validator, a lifetime, then (second script entry) the origin failing.
            for (path, body) in [
                ("/simple/demo/", "<a href=\"/packages/ab/cd/ef/demo-1.0-py3-none-any.whl\">demo</a>"),
                ("/debian/dists/bookworm/InRelease", "Origin: Debian"),
            ] {
                try origin.script(
                    path,
                    [
                        .init(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=600")], body: body),
                        .init(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=600")], body: body),
                        .init(status: 503, headers: [], body: "down"),
                    ], conditional: true)
                let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(first.status == 200 && first.text == body)
                let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(second.status == 200 && second.text == body)
                #expect(second.header("cache-status")?.contains("fwd=stale") == true, "revalidated although fresh: \(second.headers)")
                #expect(second.header("cache-status")?.contains("fwd-status=304") == true, "\(second.headers)")
                let requests = try origin.requests().filter { $0.target == path }
                #expect(requests.count == 2 && requests[1].headers.contains { $0.0.lowercased() == "if-none-match" }, "one conditional")
                let third = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(third.status == 200 && third.text == body, "the origin failed: the stored index, stale-if-error")
                #expect(third.header("cache-status")?.contains("stale-if-error") == true, "\(third.headers)")
            }
            // Artefacts: kept although the origin says no-cache; the second client never reaches it.
            for path in [
                "/packages/ab/cd/ef/demo-1.0-py3-none-any.whl?size=20000&cc=no-cache",
                "/debian/pool/main/d/demo/demo_1.0_all.deb?size=30000&cc=no-cache",
            ] {
                let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(first.status == 200 && second.body == first.body)
                #expect(second.header("cache-status")?.hasPrefix("larder; hit") == true, "\(path): \(second.headers)")
                #expect(try origin.count(path) == 1)
            }
            // Anything else keeps the HTTP rules: no-cache is revalidated (here: fetched again).
            for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [origin.url("/other?cc=no-cache")]).status == 200) }
            #expect(try origin.count("/other?cc=no-cache") == 2)
        }
    }
}

extension IntegrationTests.Presets {
    /// Real apt, with its own Dir:: options so the host's apt state is not touched, against a
    /// local Debian repository (Fixtures/apt_repo.py) through Larder with preset debian: the
    /// second machine's run takes no pool byte from the origin, and the indexes are revalidated.
    @Test func aptUpdateAndDownloadTwiceTheSecondFromTheCache() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/apt-get"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg-deb")
        else {
            print("skipped: apt-get or dpkg-deb is not installed")
            return
        }
        let directory = Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let repository = try ChildProcess(
            "/usr/bin/env", ["python3", Paths.root + "/Tests/LarderIntegrationTests/Fixtures/apt_repo.py", directory + "/repo", "3"])
        defer { repository.kill() }
        let text = try repository.waitForOutput(timeout: 30, stream: \.stdout) { $0.contains("PORT ") }
        let port = try #require(text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) })
        let larder = try Larder(config: "[cache]\npresets = [\"debian\"]\n")
        let packages = ["larder-demo-0", "larder-demo-1", "larder-demo-2"]

        func apt(machine: String) throws {
            let state = directory + "/" + machine
            for sub in ["lists/partial", "cache/archives/partial", "download"] {
                try FileManager.default.createDirectory(atPath: state + "/" + sub, withIntermediateDirectories: true)
            }
            try "".write(toFile: state + "/status", atomically: true, encoding: .utf8)
            try "deb [trusted=yes] http://127.0.0.1:\(port)/debian stable main\n".write(
                toFile: state + "/sources.list", atomically: true, encoding: .utf8)
            let options = [
                "-o", "Dir::State=\(state)", "-o", "Dir::State::status=\(state)/status", "-o", "Dir::Cache=\(state)/cache",
                "-o", "Dir::Etc::SourceList=\(state)/sources.list", "-o", "Dir::Etc::SourceParts=\(state)/none",
                "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root", "-o", "Acquire::Languages=none",
                "-o", "APT::Architectures::=all", "-o", "Acquire::http::Proxy=\(larder.proxy)",
            ]
            let update = try ChildProcess("/usr/bin/apt-get", options + ["update"])
            update.waitUntilExit()
            #expect(update.terminationStatus == 0, "\(machine) update: \(update.stdout) \(update.stderr)")
            let download = try ChildProcess(
                "/bin/sh", ["-c", "cd \"$0\" && exec /usr/bin/apt-get \"$@\"", state + "/download"] + options + ["download"] + packages)
            download.waitUntilExit()
            #expect(download.terminationStatus == 0, "\(machine) download: \(download.stdout) \(download.stderr)")
            for package in packages {
                #expect(FileManager.default.fileExists(atPath: "\(state)/download/\(package)_1.0_all.deb"), "\(machine): \(package)")
            }
        }
        func originStats() throws -> (requests: [String: [Int]], bytes: [String: Int]) {
            let answer = try Curl.run(["http://127.0.0.1:\(port)/_stats"])
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            return (object?["requests"] as? [String: [Int]] ?? [:], object?["bytes"] as? [String: Int] ?? [:])
        }

        try apt(machine: "first")
        let afterFirst = try originStats()
        try apt(machine: "second")
        let afterSecond = try originStats()
        for package in packages {
            let path = "/debian/pool/main/l/\(package)_1.0_all.deb"
            #expect(afterFirst.requests[path] == [200])
            #expect(afterSecond.requests[path] == [200], "the second machine's \(package) came from the cache")
            #expect(afterSecond.bytes[path] == afterFirst.bytes[path])
        }
        for index in ["/debian/dists/stable/Release", "/debian/dists/stable/main/binary-all/Packages"] {
            #expect(afterSecond.requests[index] == [200, 304], "\(index) revalidated: \(afterSecond.requests[index] ?? [])")
        }
    }
}

extension IntegrationTests.Presets {
    /// A registry that redirects blob downloads to signed storage URLs (as Docker Hub and
    /// GHCR do): with preset oci, the second pull's new signature is still a hit.
    @Test func ociBlobRedirectsToReSignedStorageURLsHit() throws {
        let origin = try Origin()
        let larder = try Larder(config: "[cache]\npresets = [\"oci\"]\n")
        let digest = "sha256:" + String(repeating: "ab", count: 32)
        let storage = "/registry-v2/docker/registry/v2/blobs/sha256/ab/\(String(repeating: "ab", count: 32))/data"
        try origin.script(
            "/v2/library/app/blobs/\(digest)",
            ["one", "two"].map { signature in
                .init(
                    status: 307, headers: [("Location", origin.url("\(storage)?X-Amz-Signature=\(signature)&X-Amz-Expires=60"))], body: "")
            }, conditional: false)
        for signature in ["one", "two"] {
            try origin.script(
                "\(storage)?X-Amz-Signature=\(signature)&X-Amz-Expires=60",
                [.init(status: 200, headers: [("Content-Type", "application/octet-stream")], body: "layer-bytes")], conditional: false)
        }
        for pull in 1...2 {
            let blob = try Curl.viaProxy(larder.proxy, ["-L", origin.url("/v2/library/app/blobs/\(digest)")])
            #expect(blob.status == 200 && blob.text == "layer-bytes", "pull \(pull)")
            if pull == 2 { #expect(blob.header("cache-status")?.hasPrefix("larder; hit") == true, "\(blob.headers)") }
        }
        #expect(try origin.count("\(storage)?X-Amz-Signature=one&X-Amz-Expires=60") == 1)
        #expect(try origin.count("\(storage)?X-Amz-Signature=two&X-Amz-Expires=60") == 0, "re-signed: served from the cache")
        #expect(try origin.count("/v2/library/app/blobs/\(digest)") == 2, "each pull asks the registry where the blob is")
    }
}

extension IntegrationTests.Presets {
    /// npm, Go module proxy and crates artefacts served end to end with their presets: kept
    /// although the origin says no-cache.
    @Test(arguments: [
        ("npm", "/demo/-/demo-1.0.0.tgz"), ("go", "/example.org/mod/@v/v1.0.0.zip"), ("cargo", "/api/v1/crates/demo/1.0.0/download"),
    ])
    func ecosystemArtefactsStay(_ preset: String, _ artefact: String) throws {
        let origin = try Origin()
        let larder = try Larder(config: "[cache]\npresets = [\"\(preset)\"]\n")
        let path = artefact + "?size=4000&cc=no-cache"
        for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).status == 200) }
        #expect(try origin.count(path) == 1, "\(preset): the artefact came from the cache the second time")
    }

    /// The Go module proxy's version list is revalidated before every use, fresh or not.
    @Test func goVersionListsAreRevalidated() throws {
        let origin = try Origin()
        let larder = try Larder(config: "[cache]\npresets = [\"go\"]\n")
        let index = "/example.org/mod/@v/list"
        try origin.script(
            index, [.init(status: 200, headers: [("ETag", "\"l1\""), ("Cache-Control", "max-age=60")], body: "v1.0.0\n")], conditional: true
        )
        for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [origin.url(index)]).text == "v1.0.0\n") }
        let asked = try origin.requests().filter { $0.target == index }
        #expect(asked.count == 2 && asked[1].headers.contains { $0.0.lowercased() == "if-none-match" }, "revalidated although fresh")
    }
}

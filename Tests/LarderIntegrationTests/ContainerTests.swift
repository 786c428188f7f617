import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// What the container relies on, against the real binary: `serve` makes the CA at start
    /// (and on the reload that turns interception on) and never replaces one;
    /// config/container.toml guards the admin API with the token from a Docker secret;
    /// `larder health` (the HEALTHCHECK) asks the admin listener the configuration names.
    @Suite(.timeLimit(.minutes(3))) struct Container {
        static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
            let child = try ChildProcess(Paths.larder, arguments, environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
            child.waitUntilExit()
            return child
        }

        static func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

        @Test func serveMakesTheCAAtStartAndARestartKeepsIt() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            // A fresh state volume: no CA yet (the setup made one for other tests; not this one).
            try FileManager.default.removeItem(atPath: setup.directory + "/ca")
            let origin = try setup.origin()
            let config = setup.config(ports: [origin.port])

            var larder: Larder? = try Larder(config: config)
            try larder?.child.waitForOutput { $0.contains("tls: created the CA in \(setup.directory)/ca") }
            let made = try #require(Self.contents(setup.larderCA))
            #expect(try FileManager.default.attributesOfItem(atPath: setup.directory + "/ca/ca.key")[.posixPermissions] as? Int == 0o600)
            let first = try setup.curl(try #require(larder), origin.url("/first?cc=max-age=600"))
            #expect(first.status == 200 && first.header("cache-status")?.contains("larder") == true, "\(first.stderr)")
            larder?.stop()
            larder = nil

            // The container is re-created on the same volume: the CA clients trust is kept.
            let again = try Larder(config: config)
            try again.child.waitForOutput { $0.contains("tls: intercepting CONNECT for localhost") }
            #expect(!again.child.stderr.contains("created the CA"), "\(again.child.stderr)")
            #expect(Self.contents(setup.larderCA) == made, "the CA is the one made at the first start")
            let second = try setup.curl(again, origin.url("/second?cc=max-age=600"))
            #expect(second.status == 200 && second.header("cache-status")?.contains("larder") == true, "\(second.stderr)")
        }

        /// Half a CA (the key lost) is reported and left as it is: a new key would silently
        /// invalidate the certificate clients trust.
        @Test func halfACAIsReportedNeverReplaced() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            try FileManager.default.removeItem(atPath: setup.directory + "/ca/ca.key")
            let certificate = try #require(Self.contents(setup.larderCA))
            let path = setup.directory + "/larder.toml"
            try setup.config(ports: [443]).write(toFile: path, atomically: true, encoding: .utf8)
            let serve = try Self.run([
                "serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                "--cache-dir", setup.directory + "/cache",
            ])
            #expect(serve.terminationStatus == 1)
            #expect(serve.stderr.contains("CA cannot be used") && serve.stderr.contains("not started"), "\(serve.stderr)")
            #expect(Self.contents(setup.larderCA) == certificate)
            #expect(!FileManager.default.fileExists(atPath: setup.directory + "/ca/ca.key"))
        }

        @Test func theReloadThatTurnsInterceptionOnMakesTheCA() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            try FileManager.default.removeItem(atPath: setup.directory + "/ca")
            let origin = try setup.origin()
            let larder = try Larder(config: setup.config(ports: [origin.port], intercept: "[]"))
            #expect(!FileManager.default.fileExists(atPath: setup.larderCA), "nothing to intercept: no CA")
            try larder.rewriteConfig(setup.config(ports: [origin.port]))
            larder.child.signal(SIGHUP)
            let log = try larder.child.waitForOutput { $0.contains("reloaded") || $0.contains("reload rejected") }
            #expect(log.contains("tls: created the CA in \(setup.directory)/ca") && !log.contains("reload rejected"), "\(log)")
            let intercepted = try setup.curl(larder, origin.url("/after-reload"))
            #expect(intercepted.status == 200 && intercepted.header("cache-status")?.contains("larder") == true, "\(intercepted.stderr)")
        }

        /// config/container.toml, as shipped: it checks clean (no open-admin warning), needs the
        /// admin-token secret to start, and with it refuses changing calls without the token.
        @Test func theContainerConfigurationGuardsTheAdminAPIWithTheSecret() throws {
            let shipped = Paths.root + "/config/container.toml"
            let text = try String(contentsOfFile: shipped, encoding: .utf8)
            let secrets = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: secrets) }

            let missing = try Self.run(["check-config", shipped], environment: ["CREDENTIALS_DIRECTORY": secrets])
            #expect(missing.terminationStatus == 1)
            #expect(missing.stderr.contains("admin.token_file: cannot read '\(secrets)/admin-token'"), "\(missing.stderr)")

            try "container-s3cret\n".write(toFile: secrets + "/admin-token", atomically: true, encoding: .utf8)
            #expect(chmod(secrets + "/admin-token", 0o400) == 0)
            let checked = try Self.run(["check-config", shipped], environment: ["CREDENTIALS_DIRECTORY": secrets])
            #expect(checked.terminationStatus == 0, "\(checked.stderr)")
            #expect(!checked.stderr.contains("admin listener"), "no open-admin warning: \(checked.stderr)")

            let larder = try Larder(config: text, environment: ["CREDENTIALS_DIRECTORY": secrets])
            let purge = "http://127.0.0.1:\(larder.adminPort)/purge?url=http%3A%2F%2Fexample.org%2F"
            #expect(try Curl.run(["-X", "POST", purge]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer wrong", purge]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer container-s3cret", purge]).status == 200)
            #expect(try Curl.run(["http://127.0.0.1:\(larder.adminPort)/cache?prefix=http://"]).status == 401)
            #expect(try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"]).status == 200, "health stays open")
        }

        /// Processes starting together on one empty ca_dir (two `serve`s, the unit's
        /// `ca init --if-missing`) make one CA between them: every one succeeds, exactly one says
        /// it made the CA, and what it made is the pair on disk, which the others then use.
        @Test func processesStartingTogetherMakeOneCA() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // A few rounds, each on a fresh directory: the race is a matter of milliseconds.
            for round in 0..<4 {
                let ca = "\(directory)/ca\(round)"
                let path = "\(directory)/larder\(round).toml"
                try "[tls]\nintercept = [\"a.example\"]\nca_dir = \"\(ca)\"\n".write(toFile: path, atomically: true, encoding: .utf8)
                var inits: [ChildProcess] = []
                var serves: [ChildProcess] = []
                for index in 0..<6 {
                    if index % 3 == 0 {
                        let arguments = [
                            "serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--cache-dir",
                            "\(directory)/cache\(round)-\(index)",
                        ]
                        serves.append(try ChildProcess(Paths.larder, arguments, environment: ["PATH": "/usr/bin:/bin"]))
                    } else {
                        inits.append(try ChildProcess(Paths.larder, ["ca", "init", "--if-missing", "--config", path]))
                    }
                }
                defer { for serve in serves { serve.stop() } }
                for serve in serves { try serve.waitForOutput(timeout: 30) { $0.contains("listening") } }
                for child in inits { #expect(child.terminationStatus == 0, "\(child.stderr)") }

                let shown = try Self.run(["ca", "show", "--dir", ca])
                #expect(shown.terminationStatus == 0, "the key on disk is the certificate's: \(shown.stderr)")
                let line = shown.stdout.split(separator: "\n").first { $0.contains("sha256:") }
                let fingerprint = try #require(line?.split(separator: " ").last.map(String.init), "\(shown.stdout)")
                let creators =
                    inits.map(\.stdout).filter { $0.contains("created") } + serves.map(\.stderr).filter { $0.contains("created the CA") }
                #expect(creators.count == 1, "round \(round): \(creators)")
                #expect(creators.allSatisfy { $0.contains(fingerprint) }, "made \(creators), on disk \(fingerprint)")
            }
        }

        /// `larder health` against an admin listener that misbehaves (Fixtures/hostile_admin.py):
        /// a 2 GB body, an endless chunked one, one byte every half second, terminal control
        /// sequences. Each is unhealthy (exit 1) within the command's 5 seconds, with the reason,
        /// and nothing the server sent can drive the terminal.
        @Test(arguments: [
            ("huge", "over 4096 bytes"), ("endless", "over 4096 bytes"), ("drip", "no whole answer within 5 s"),
            ("control", "503 draining \\u{1B}]0;owned\\u{7}\\u{1B}[2J\\u{9B}31m"),
        ])
        func healthIsBoundedAgainstAHostileListener(mode: String, reason: String) throws {
            let (health, elapsed) = try Self.runAgainstHostileListener(mode: mode, ["health"])
            #expect(health.terminationStatus == 1, "\(mode): \(health.stderr)")
            #expect(elapsed < 8, "\(mode): took \(elapsed) s")
            #expect(health.stderr.contains(reason), "\(mode): \(health.stderr)")
            let output = Array((health.stdout + health.stderr).utf8)
            #expect(!output.contains(0x1B) && !output.contains(0x07) && !output.contains(0x0D), "\(mode): \(output)")
            #expect(output.count < 1024, "\(mode): printed \(output.count) bytes")
        }

        /// The other admin commands keep at most 64 MiB of an answer.
        @Test(arguments: ["huge", "endless"]) func adminCommandsRefuseAnOversizedAnswer(mode: String) throws {
            let (listing, elapsed) = try Self.runAgainstHostileListener(mode: mode, ["ls", "--token", "t"])
            #expect(listing.terminationStatus == 1, "\(mode): \(listing.stderr)")
            #expect(listing.stderr.contains("over \(64 << 20) bytes"), "\(mode): \(listing.stderr)")
            #expect(elapsed < 10, "\(mode): took \(elapsed) s")
        }

        /// Runs `larder ARGUMENTS --admin` against Fixtures/hostile_admin.py in `mode`, killed
        /// after 12 s (so a command that does not stop fails its test, not the suite).
        static func runAgainstHostileListener(mode: String, _ arguments: [String]) throws -> (ChildProcess, TimeInterval) {
            let script = Paths.root + "/Tests/LarderIntegrationTests/Fixtures/hostile_admin.py"
            let server = try ChildProcess("/usr/bin/env", ["python3", script, mode])
            defer { server.kill() }
            let port = try #require(Int(Self.trimmedFirstLine(try server.waitForOutput(stream: \.stdout) { $0.contains("\n") })))
            let started = Date()
            let child = try ChildProcess(Paths.larder, arguments + ["--admin", "127.0.0.1:\(port)"])
            while child.isRunning && Date().timeIntervalSince(started) < 12 { usleep(20_000) }
            let elapsed = Date().timeIntervalSince(started)
            #expect(!child.isRunning, "\(mode): \(arguments) still running after \(elapsed) s")
            child.kill()
            return (child, elapsed)
        }

        static func trimmedFirstLine(_ text: String) -> String {
            String(text.split(separator: "\n").first ?? "").trimmingCharacters(in: .whitespaces)
        }

        /// The HEALTHCHECK's command finds a non-default admin address in the configuration
        /// (--config, or $LARDER_CONFIG as the image's /etc/larder/larder.toml is found), and
        /// says unhealthy (exit 1) with the reason.
        @Test func healthAsksTheAdminListenerTheConfigurationNames() throws {
            let port = try freePort()
            let config = "[admin]\nlisten = \"127.0.0.1:\(port)\"\n"
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/larder.toml"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            var larder: Larder? = try Larder(config: config, adminListen: "127.0.0.1:\(port)")
            #expect(larder?.adminPort == port)

            let byFlag = try Self.run(["health", "--config", path])
            #expect(byFlag.terminationStatus == 0, "\(byFlag.stderr)")
            #expect(byFlag.stdout.contains("127.0.0.1:\(port): ok"), "\(byFlag.stdout)")
            let byEnvironment = try Self.run(["health"], environment: ["LARDER_CONFIG": path])
            #expect(byEnvironment.terminationStatus == 0, "\(byEnvironment.stderr)")

            larder?.stop()
            larder = nil
            let down = try Self.run(["health", "--config", path])
            #expect(down.terminationStatus == 1)
            #expect(down.stderr.contains("127.0.0.1:\(port)") && down.stderr.contains("cannot connect"), "\(down.stderr)")

            // A disk tier that cannot work: the daemon answers, unhealthy.
            let (cache, cleanup) = try Health.unusableCachePath()
            defer { try? FileManager.default.removeItem(atPath: cleanup) }
            let degraded = try Larder(config: "[disk]\nrequired = false\n", cacheDirectory: cache)
            let unhealthy = try Self.run(["health", "--admin", "127.0.0.1:\(degraded.adminPort)"])
            #expect(unhealthy.terminationStatus == 1)
            #expect(unhealthy.stderr.contains("503") && unhealthy.stderr.contains("disk tier unavailable"), "\(unhealthy.stderr)")
        }
    }
}

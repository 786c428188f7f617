import Foundation
import Testing

extension IntegrationTests {
    /// The image's files, checked where no Docker engine runs: scripts/docker-context.sh builds
    /// the context a fresh clone gives `docker build` (tracked files less .dockerignore) and
    /// refuses a COPY of anything missing from it; the Dockerfile, compose.yaml and
    /// config/container.toml agree on volumes, secrets, health and stop timeout.
    @Suite(.timeLimit(.minutes(2))) struct ContainerFiles {
        static let script = Paths.root + "/scripts/docker-context.sh"

        static func run(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
            let child = try ChildProcess(executable, arguments, environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
            child.waitUntilExit()
            return child
        }

        /// A scratch git work tree holding `files`, of which `tracked` are in the index, and this
        /// repository's docker-context.sh.
        static func repository(_ files: [String: String], tracked: [String]) throws -> String {
            let directory = Paths.temporaryDirectory()
            for (path, text) in files {
                let full = directory + "/" + path
                try FileManager.default.createDirectory(
                    atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try text.write(toFile: full, atomically: true, encoding: .utf8)
            }
            try FileManager.default.createDirectory(atPath: directory + "/scripts", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: script, toPath: directory + "/scripts/docker-context.sh")
            let initialised = try run("/usr/bin/env", ["git", "-C", directory, "init", "-q"])
            #expect(initialised.terminationStatus == 0, "\(initialised.stderr)")
            let added = try run("/usr/bin/env", ["git", "-C", directory, "add", "-f", "--"] + tracked + ["scripts"])
            #expect(added.terminationStatus == 0, "\(added.stderr)")
            return directory
        }

        /// docker-context.sh in `repository`, into a fresh folder: the process and the folder.
        static func context(_ repository: String) throws -> (ChildProcess, String) {
            let target = repository + "/context"
            return (try run(repository + "/scripts/docker-context.sh", [target]), target)
        }

        @Test func theContextIsWhatAFreshCloneSendsLessDockerignore() throws {
            let repository = try Self.repository(
                [
                    "Dockerfile": "FROM scratch AS build\nCOPY a.txt \\\n    keep.log ./\nCOPY dir ./dir\nCOPY --from=build /out/x /x\n",
                    ".dockerignore": "# build folders\ndir/build/\n**/*.log\n!keep.log\n",
                    "a.txt": "a", "keep.log": "kept", "dir/x.swift": "x", "dir/build/junk": "junk", "dir/y.log": "log",
                    "dir/untracked.swift": "not added",
                ],
                tracked: ["Dockerfile", ".dockerignore", "a.txt", "keep.log", "dir/x.swift", "dir/build/junk", "dir/y.log"])
            defer { try? FileManager.default.removeItem(atPath: repository) }
            let (made, target) = try Self.context(repository)
            #expect(made.terminationStatus == 0, "\(made.stderr)")
            for present in ["a.txt", "keep.log", "dir/x.swift"] {
                #expect(FileManager.default.fileExists(atPath: target + "/" + present), "\(present)")
            }
            for absent in ["dir/build/junk", "dir/y.log", "dir/untracked.swift", "Dockerfile"] {
                #expect(!FileManager.default.fileExists(atPath: target + "/" + absent), "\(absent) is not in the context")
            }
            #expect(made.stderr.contains("not tracked by git: dir/untracked.swift"), "\(made.stderr)")
        }

        @Test(arguments: [
            ("untracked", "git does not track"), ("ignoredByDocker", ".dockerignore excludes"),
            ("ignoredByGit", ".gitignore matches"), ("missing", "which does not exist"),
        ])
        func aCopyOfWhatAFreshCloneLacksFails(_ name: String, _ reason: String) throws {
            let repository = try Self.repository(
                [
                    "Dockerfile": "FROM scratch\nCOPY Package.swift \(name) ./\n", ".dockerignore": "ignoredByDocker\n",
                    ".gitignore": "ignoredByGit\n", "Package.swift": "//", "untracked": "u", "ignoredByDocker": "d",
                    "ignoredByGit": "g",
                ],
                tracked: ["Dockerfile", ".dockerignore", ".gitignore", "Package.swift", "ignoredByDocker", "ignoredByGit"])
            defer { try? FileManager.default.removeItem(atPath: repository) }
            let (made, _) = try Self.context(repository)
            #expect(made.terminationStatus == 1)
            #expect(made.stderr.contains("copies \(name)") && made.stderr.contains(reason), "\(made.stderr)")
        }

        /// This repository: Package.resolved is in the context, so the build's
        /// --force-resolved-versions has the pins to force.
        @Test func thisRepositorysContextHoldsThePins() throws {
            let target = Paths.temporaryDirectory() + "/context"
            defer { try? FileManager.default.removeItem(atPath: (target as NSString).deletingLastPathComponent) }
            let made = try Self.run(Self.script, [target])
            #expect(made.terminationStatus == 0, "\(made.stderr)")
            for path in ["Package.swift", "Package.resolved", "Makefile", "Sources/larder/Larder.swift", "config/container.toml"] {
                #expect(FileManager.default.fileExists(atPath: target + "/" + path), "\(path)")
            }
            let makefile = try String(contentsOfFile: Paths.root + "/Makefile", encoding: .utf8)
            #expect(makefile.contains("PINNED = --force-resolved-versions") && makefile.contains("RELEASE_FLAGS = $(PINNED)"))
            #expect(try Self.dockerfile().contains { $0.hasPrefix("RUN make release") })
        }

        /// The Dockerfile's instructions, continued lines joined.
        static func dockerfile() throws -> [String] {
            let text = try String(contentsOfFile: Paths.root + "/Dockerfile", encoding: .utf8)
            return text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n").map(String.init)
                .filter { !$0.hasPrefix("#") }
        }

        /// "10s", "2m" as seconds.
        static func seconds(_ text: Substring) -> Int? {
            guard let number = Int(text.dropLast()) else { return nil }
            switch text.last {
            case "s": return number
            case "m": return number * 60
            default: return nil
            }
        }

        /// The first capture of `pattern` in `text`.
        static func capture(_ pattern: String, in text: String) -> Substring? {
            guard let match = text.firstMatch(of: try! Regex(pattern)), let range = match.output[1].range else { return nil }
            return text[range]
        }

        @Test func theImageKeepsItsStateAndOutlastsTheDrain() throws {
            let instructions = try Self.dockerfile()
            let header = try String(contentsOfFile: Paths.root + "/Dockerfile", encoding: .utf8)
            let configuration = try String(contentsOfFile: Paths.root + "/config/container.toml", encoding: .utf8)
            let compose = try String(contentsOfFile: Paths.root + "/compose.yaml", encoding: .utf8)
            let readme = try String(contentsOfFile: Paths.root + "/README.md", encoding: .utf8)

            let volumes = instructions.filter { $0.hasPrefix("VOLUME") }.joined()
            #expect(volumes.contains("\"/var/cache/larder\"") && volumes.contains("\"/var/lib/larder\""), "\(volumes)")
            #expect(Self.capture(#"(?m)^path = "([^"]+)""#, in: configuration) == "/var/cache/larder")
            #expect(Self.capture(#"(?m)^ca_dir = "([^"]+)""#, in: configuration)?.hasPrefix("/var/lib/larder/") == true)
            for mount in ["/var/cache/larder", "/var/lib/larder"] {
                #expect(compose.contains(":\(mount)\n") || compose.contains(":\(mount) "), "compose.yaml mounts \(mount)")
            }

            #expect(instructions.contains("ENV CREDENTIALS_DIRECTORY=/run/secrets"))
            #expect(configuration.contains("token_file = \"${CREDENTIALS_DIRECTORY}/admin-token\""))
            #expect(compose.contains("- admin-token"))

            let health = try #require(instructions.first { $0.hasPrefix("HEALTHCHECK") })
            #expect(health.contains("\"health\"") && !health.contains("3129") && !health.contains("127.0.0.1"), "\(health)")

            #expect(instructions.contains("STOPSIGNAL SIGTERM"))
            let drain = try #require(Self.capture(#"(?m)^drain_timeout = "(\w+)""#, in: configuration).flatMap(Self.seconds))
            let grace = try #require(Self.capture(#"stop_grace_period: (\w+)"#, in: compose).flatMap(Self.seconds))
            #expect(grace > drain, "compose.yaml stops after \(grace) s, the drain takes \(drain) s")
            for (name, text) in [("Dockerfile", header), ("README.md", readme)] {
                let timeout = try #require(Self.capture(#"--stop-timeout (\d+)"#, in: text).flatMap { Int($0) }, "\(name)")
                #expect(timeout > drain, "\(name): docker run --stop-timeout \(timeout), the drain takes \(drain) s")
            }
        }
    }
}

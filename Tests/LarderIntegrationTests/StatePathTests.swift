import Foundation
import Testing

extension IntegrationTests {
    /// A relative path in the configuration names one file for every command, whatever the
    /// working directory each runs in (docs/OPERATIONS.md, "Paths").
    @Suite(.timeLimit(.minutes(3))) struct StatePaths {
        private static let environment = ["PATH": "/usr/bin:/bin"]

        /// Runs `larder ARGUMENTS` in `directory` (through env -C, which execs it) to the end.
        private func larder(_ arguments: [String], in directory: String, environment: [String: String] = Self.environment) throws
            -> (status: Int32, out: String, err: String)
        {
            let child = try ChildProcess("/usr/bin/env", ["-C", directory, Paths.larder] + arguments, environment: environment)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        /// `larder serve` in `directory`, until it listens; the caller stops it.
        private func serve(config: String, in directory: String, cache: String, environment: [String: String] = Self.environment) throws
            -> ChildProcess
        {
            let arguments = [
                "-C", directory, Paths.larder, "serve", "--config", config, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                "--cache-dir", cache,
            ]
            return try ChildProcess("/usr/bin/env", arguments, environment: environment)
        }

        private func fingerprint(_ text: String) -> String? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("sha256:") }) else { return nil }
            return line.dropFirst("sha256:".count).trimmingCharacters(in: .whitespaces)
        }

        private func makeDirectories(_ root: String, _ names: [String]) throws {
            for name in names { try FileManager.default.createDirectory(atPath: root + "/" + name, withIntermediateDirectories: true) }
        }

        @Test func aRelativeCADirectoryIsTheSameForCAInitCheckConfigAndServe() throws {
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            try makeDirectories(root, ["conf", "a", "b", "c"])
            let config = root + "/conf/larder.toml"
            try "[tls]\nintercept = [\"registry.example.org\"]\nca_dir = \"ca\"\n".write(toFile: config, atomically: true, encoding: .utf8)

            // Without a CA, check-config names the directory where serve will make and read it.
            let missing = try larder(["check-config", "../conf/larder.toml"], in: root + "/b")
            #expect(missing.status == 0, "\(missing.err)")
            #expect(missing.out.contains("\(root)/conf/ca holds no CA: serve makes it at start"), "\(missing.out)")

            let made = try larder(["ca", "init", "--config", config], in: root + "/a")
            #expect(made.status == 0, "\(made.err)")
            #expect(made.out.contains("created \(root)/conf/ca/ca.pem"), "\(made.out)")
            #expect(FileManager.default.fileExists(atPath: root + "/conf/ca/ca.key"))
            #expect(!FileManager.default.fileExists(atPath: root + "/a/ca"), "not in ca init's working directory")
            let madeFingerprint = try #require(fingerprint(made.out), "\(made.out)")

            let checked = try larder(["check-config", "../conf/larder.toml"], in: root + "/b")
            #expect(checked.status == 0, "\(checked.err)")
            #expect(checked.out.contains("relative paths resolve against \(root)/conf"), "\(checked.out)")
            #expect(checked.out.contains("tls.ca_dir = \(root)/conf/ca\n"), "\(checked.out)")

            let shown = try larder(["ca", "show", "--config", "conf/larder.toml"], in: root)
            #expect(shown.status == 0 && fingerprint(shown.out) == madeFingerprint, "\(shown.out)\(shown.err)")

            let server = try serve(config: config, in: root + "/c", cache: root + "/cache")
            defer { server.stop() }
            let log = try server.waitForOutput { $0.contains("tls: intercepting") }
            #expect(log.contains("ca=\(madeFingerprint)"), "serve uses the CA ca init made: \(log)")
            #expect(!FileManager.default.fileExists(atPath: root + "/c/ca"))
        }

        @Test func underSystemdTheStateDirectoryIsTheBaseAndCheckConfigTakesItAsAFlag() throws {
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            try makeDirectories(root, ["conf", "state", "a", "b", "c"])
            let config = root + "/conf/larder.toml"
            try "[tls]\nintercept = [\"registry.example.org\"]\nca_dir = \"ca\"\n[log]\naccess_file = \"access.log\"\n"
                .write(toFile: config, atomically: true, encoding: .utf8)
            // As the unit runs them: STATE_DIRECTORY set, the working directory elsewhere.
            let unit = Self.environment.merging(["STATE_DIRECTORY": root + "/state"]) { $1 }

            let made = try larder(["ca", "init", "--if-missing", "--config", config], in: root + "/a", environment: unit)
            #expect(made.status == 0, "\(made.err)")
            #expect(FileManager.default.fileExists(atPath: root + "/state/ca/ca.pem"), "\(made.out)")
            let madeFingerprint = try #require(fingerprint(made.out), "\(made.out)")

            let server = try serve(config: config, in: root + "/c", cache: root + "/cache", environment: unit)
            defer { server.stop() }
            let log = try server.waitForOutput { $0.contains("tls: intercepting") }
            #expect(log.contains("ca=\(madeFingerprint)"), "\(log)")
            #expect(log.contains("state=\(root)/state"), "the start-up line names the state directory: \(log)")
            #expect(FileManager.default.fileExists(atPath: root + "/state/access.log"))

            // From an operator's shell: the same files, named with --state-dir.
            let checked = try larder(["check-config", "--state-dir", root + "/state", config], in: root + "/b")
            #expect(checked.status == 0, "\(checked.err)")
            #expect(checked.out.contains("tls.ca_dir = \(root)/state/ca\n"), "\(checked.out)")
            #expect(checked.out.contains("log.access_file = \(root)/state/access.log\n"), "\(checked.out)")
        }
        @Test func checkConfigNamesTheCacheDirectoryServeIsGivenWhichWinsOverDiskPath() throws {
            let root = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            try makeDirectories(root, ["conf", "b"])
            let config = root + "/conf/larder.toml"
            try "[disk]\npath = \"mine\"\n".write(toFile: config, atomically: true, encoding: .utf8)

            let plain = try larder(["check-config", config], in: root + "/b")
            #expect(plain.status == 0 && plain.out.contains("disk.path = \(root)/conf/mine (not there yet)\n"), "\(plain.out)")
            #expect(!plain.err.contains("warning"), "\(plain.err)")

            // As the packaged unit has it: serve --cache-dir ${CACHE_DIRECTORY}, whatever the file says.
            let unit = Self.environment.merging(["CACHE_DIRECTORY": root + "/cache"]) { $1 }
            let served = try larder(["check-config", config], in: root + "/b", environment: unit)
            #expect(served.status == 0, "\(served.err)")
            #expect(served.out.contains("at \(root)/cache;"), "the summary names it: \(served.out)")
            #expect(
                served.out.contains("disk.path = \(root)/cache ($CACHE_DIRECTORY, the packaged unit's serve --cache-dir, which wins"),
                "\(served.out)")
            #expect(
                served.err.contains("warning: disk.path = \(root)/conf/mine is not used: serve is given --cache-dir \(root)/cache"),
                "\(served.err)")

            let flag = try larder(["check-config", "--cache-dir", "here", config], in: root + "/b", environment: unit)
            #expect(flag.out.contains("disk.path = \(root)/b/here (--cache-dir, which wins"), "the shell's path: \(flag.out)")

            // The default disk.path is no mistake to warn about.
            try "[proxy]\nworkers = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
            let quiet = try larder(["check-config", config], in: root + "/b", environment: unit)
            #expect(quiet.status == 0 && !quiet.err.contains("warning"), "\(quiet.err)")
            #expect(!quiet.out.contains("a reload does not apply disk.path"), "the file does not set it: \(quiet.out)")

            // One directory through a symbolic link is the same directory (review 124).
            try makeDirectories(root, ["real"])
            try FileManager.default.createSymbolicLink(atPath: root + "/conf/link", withDestinationPath: root + "/real")
            try "[disk]\npath = \"link\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            let linked = try larder(["check-config", "--cache-dir", root + "/real", config], in: root + "/b")
            #expect(linked.status == 0 && !linked.err.contains("warning"), "\(linked.err)")
            // An empty --cache-dir would be serve's working directory: both refuse it.
            let empty = try larder(["check-config", "--cache-dir", "", config], in: root + "/b")
            #expect(empty.status == 64 && empty.err.contains("--cache-dir is empty"), "\(empty.err)")
            let serve = try larder(["serve", "--config", config, "--cache-dir", "", "--listen", "127.0.0.1:0"], in: root + "/b")
            #expect(serve.status == 64 && serve.err.contains("--cache-dir is empty"), "\(serve.err)")
            #expect(!FileManager.default.fileExists(atPath: root + "/b/v1"), "nothing made in the working directory")
        }
    }
}

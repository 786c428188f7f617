import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Secrets out of the configuration file: `admin.token_file` (also through systemd's
    /// credentials directory) and `proxy.auth_users_file`, read at start and on SIGHUP, and
    /// check-config's warnings about who may read them.
    @Suite(.timeLimit(.minutes(2))) struct Secrets {
        static func write(_ text: String, to path: String, mode: mode_t) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            #expect(chmod(path, mode) == 0)
        }

        @Test func aTokenFromTheCredentialsDirectoryGuardsTheAdminCalls() throws {
            let credentials = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: credentials) }
            try Self.write("s3cret-from-systemd\n", to: credentials + "/admin-token", mode: 0o400)
            let larder = try Larder(
                config: "[admin]\ntoken_file = \"${CREDENTIALS_DIRECTORY}/admin-token\"\n",
                environment: ["CREDENTIALS_DIRECTORY": credentials])
            let admin = "http://127.0.0.1:\(larder.adminPort)/purge?url=http%3A%2F%2Fexample.org%2F"
            #expect(try Curl.run(["-X", "POST", admin]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer s3cret-from-systemd", admin]).status != 401)

            // SIGHUP reads the file again.
            try Self.write("rotated\n", to: credentials + "/admin-token", mode: 0o400)
            larder.child.signal(SIGHUP)
            try larder.child.waitForOutput { $0.contains("reloaded") }
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer s3cret-from-systemd", admin]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer rotated", admin]).status != 401)
        }

        /// The shipped unit's LoadCredential=admin-token (and an optional proxy-users) guard
        /// the daemon with no key in the configuration; a key in the configuration wins.
        @Test func credentialsApplyWhenTheConfigurationNamesNoSecret() throws {
            let credentials = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: credentials) }
            try Self.write("from-the-unit\n", to: credentials + "/admin-token", mode: 0o400)
            let alice = try hashPassword(user: "alice", password: "pw")
            try Self.write("\(alice)\n", to: credentials + "/proxy-users", mode: 0o400)
            let origin = try Origin()
            let larder = try Larder(environment: ["CREDENTIALS_DIRECTORY": credentials])
            let admin = "http://127.0.0.1:\(larder.adminPort)/purge?url=http%3A%2F%2Fexample.org%2F"
            #expect(try Curl.run(["-X", "POST", admin]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer from-the-unit", admin]).status == 200)
            let url = origin.url("/credential-users")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 407)
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:pw", url]).status == 200)

            let inline = try Larder(config: "[admin]\ntoken = \"inline\"\n", environment: ["CREDENTIALS_DIRECTORY": credentials])
            let inlineAdmin = "http://127.0.0.1:\(inline.adminPort)/purge?url=http%3A%2F%2Fexample.org%2F"
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer from-the-unit", inlineAdmin]).status == 401)
            #expect(try Curl.run(["-X", "POST", "-H", "Authorization: Bearer inline", inlineAdmin]).status == 200)
        }

        /// `larder purge` finds the token the way the daemon does, or from --token-file, and says
        /// where to look when it cannot.
        @Test func theCommandLineReadsTheDaemonsToken() throws {
            let credentials = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: credentials) }
            try Self.write("cli-secret\n", to: credentials + "/admin-token", mode: 0o400)
            let larder = try Larder(
                config: "[admin]\ntoken_file = \"${CREDENTIALS_DIRECTORY}/admin-token\"\n",
                environment: ["CREDENTIALS_DIRECTORY": credentials])
            func purge(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
                let child = try ChildProcess(
                    Paths.larder, ["purge", "http://example.org/x"] + arguments,
                    environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
                child.waitUntilExit()
                return child
            }
            let address = "127.0.0.1:\(larder.adminPort)"
            let viaConfig = try purge(
                ["--config", larder.configPath, "--admin", address], environment: ["CREDENTIALS_DIRECTORY": credentials])
            #expect(viaConfig.terminationStatus == 0, "\(viaConfig.stderr)")
            let viaFile = try purge(["--admin", address, "--token-file", credentials + "/admin-token"])
            #expect(viaFile.terminationStatus == 0, "\(viaFile.stderr)")
            let wrong = try purge(["--admin", address, "--token", "nope"])
            #expect(wrong.terminationStatus != 0)
            let unset = try purge(["--config", larder.configPath, "--admin", address])
            #expect(unset.terminationStatus != 0)
            #expect(unset.stderr.contains("/run/credentials/larder.service") && unset.stderr.contains("--token-file"), "\(unset.stderr)")
            let missing = try purge(["--admin", address, "--token-file", credentials + "/absent"])
            #expect(missing.terminationStatus != 0 && missing.stderr.contains("cannot read"), "\(missing.stderr)")
        }

        @Test func proxyUsersFromAFile() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let alice = try hashPassword(user: "alice", password: "correct horse")
            try Self.write("# the proxy's users\n\n\(alice)\n", to: directory + "/users", mode: 0o600)
            let origin = try Origin()
            let larder = try Larder(config: "[proxy]\nauth_users_file = \"\(directory)/users\"\n")
            let url = origin.url("/users?cc=max-age=60")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 407)
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:correct horse", url]).status == 200)
        }

        @Test func checkConfigNamesBadLinesAndWarnsAboutReadableSecrets() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            func check(_ config: String) throws -> ChildProcess {
                try Self.write(config, to: directory + "/larder.toml", mode: 0o600)
                let child = try ChildProcess(
                    Paths.larder, ["check-config", directory + "/larder.toml"], environment: ["PATH": "/usr/bin:/bin"])
                child.waitUntilExit()
                return child
            }
            try Self.write("token\n", to: directory + "/token", mode: 0o644)
            let readable = try check("[admin]\ntoken_file = \"\(directory)/token\"\n")
            #expect(readable.terminationStatus == 0)
            #expect(
                readable.stderr.contains("warning: admin.token_file '\(directory)/token' is readable by every user (mode 644)"),
                "\(readable.stderr)")
            #expect(chmod(directory + "/token", 0o600) == 0)
            #expect(try check("[admin]\ntoken_file = \"\(directory)/token\"\n").stderr.isEmpty)

            let both = try check("[admin]\ntoken = \"x\"\ntoken_file = \"\(directory)/token\"\n")
            #expect(both.terminationStatus == 1 && both.stderr.contains("not both"), "\(both.stderr)")

            try Self.write("alice:plaintext\n", to: directory + "/users", mode: 0o600)
            let plain = try check("[proxy]\nauth_users_file = \"\(directory)/users\"\n")
            #expect(plain.terminationStatus == 1)
            #expect(
                plain.stderr.contains("\(directory)/users:1:") && plain.stderr.contains("plain passwords are not accepted"),
                "\(plain.stderr)")

            let unset = try check("[admin]\ntoken_file = \"${CREDENTIALS_DIRECTORY}/admin-token\"\n")
            #expect(unset.terminationStatus == 1 && unset.stderr.contains("not set"), "\(unset.stderr)")

            // Inline secrets in a file every user can read.
            try Self.write("[admin]\ntoken = \"inline\"\n", to: directory + "/inline.toml", mode: 0o644)
            let inline = try ChildProcess(
                Paths.larder, ["check-config", directory + "/inline.toml"], environment: ["PATH": "/usr/bin:/bin"])
            inline.waitUntilExit()
            #expect(inline.stderr.contains("holds admin.token or proxy.auth_users and is readable by every user"), "\(inline.stderr)")
        }
    }
}

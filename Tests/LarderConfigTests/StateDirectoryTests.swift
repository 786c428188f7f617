import LarderConfig
import Testing

/// Which directory relative paths resolve against, and what they become.
@Suite struct StateDirectoryTests {
    private func choose(flag: String? = nil, config: String?, environment: [String: String] = [:], cwd: String = "/home/op")
        -> StateDirectory
    {
        StateDirectory.choose(flag: flag, configPath: config, environment: environment, workingDirectory: cwd)
    }

    @Test func theFlagWinsAndIsTakenFromTheWorkingDirectory() {
        #expect(choose(flag: "state", config: "/etc/larder/larder.toml", environment: ["STATE_DIRECTORY": "/x"]).path == "/home/op/state")
        #expect(choose(flag: "/srv/s/", config: nil).path == "/srv/s")
    }

    @Test func systemdsStateDirectoryComesNextAndItsFirstEntryOnly() {
        let chosen = choose(config: "/srv/conf/larder.toml", environment: ["STATE_DIRECTORY": "/var/lib/larder:/var/lib/other"])
        #expect(chosen.path == "/var/lib/larder")
        #expect(chosen.reason == "$STATE_DIRECTORY")
    }

    @Test func aFileInEtcLarderMeansTheServicesStateDirectoryFromAnyWorkingDirectory() {
        #expect(choose(config: "/etc/larder/larder.toml").path == "/var/lib/larder")
        #expect(choose(config: "larder.toml", cwd: "/etc/larder").path == "/var/lib/larder")
        #expect(choose(config: "../../etc/larder/other.toml", cwd: "/root/x").path == "/var/lib/larder")
    }

    @Test func anyOtherFileMeansItsOwnDirectoryAndNoFileTheWorkingDirectory() {
        #expect(choose(config: "conf/larder.toml", cwd: "/home/op").path == "/home/op/conf")
        #expect(choose(config: "/srv/larder.toml", cwd: "/tmp").path == "/srv")
        #expect(choose(config: "/larder.toml").path == "/")
        #expect(choose(config: nil, cwd: "/home/op/").path == "/home/op")
    }

    @Test func pathsAreNormalizedLexically() {
        #expect(StateDirectory.absolute("a/./b/../c//d/", against: "/base") == "/base/a/c/d")
        #expect(StateDirectory.absolute("/abs/../x", against: "/base") == "/x")
        #expect(StateDirectory.absolute("../../..", against: "/a") == "/")
    }

    @Test func loadingResolvesEveryPathKeyAndReadsSecretsFromThere() throws {
        let base = StateDirectory(path: "/srv/state", reason: "test")
        let text = """
            [disk]
            path = "cache"
            [tls]
            ca_dir = "ca"
            upstream_ca_file = "/etc/ssl/extra.pem"
            [log]
            access_file = "logs/access.log"
            """
        let config = try ConfigLoader.parse(text, file: "t.toml", stateDirectory: base).get()
        #expect(config.disk.path == "/srv/state/cache")
        #expect(config.tls.caDirectory == "/srv/state/ca")
        #expect(config.tls.upstreamCAFile == "/etc/ssl/extra.pem")
        #expect(config.log.accessFile == "/srv/state/logs/access.log")
        #expect(config.admin.tokenFile.isEmpty, "a key not set stays unset")
        #expect(config.paths.allSatisfy { $0.path.isEmpty || $0.path.hasPrefix("/") })
        // A secret file is read from the state directory too: the error names where it looked.
        let missing = ConfigLoader.parse("[admin]\ntoken_file = \"token\"\n", file: "t.toml", stateDirectory: base)
        guard case .failure(let errors) = missing else {
            Issue.record("a missing token file must be an error")
            return
        }
        #expect(errors.description.contains("cannot read '/srv/state/token'"), "\(errors.description)")
    }
}

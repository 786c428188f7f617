import LarderConfig
import Testing

/// The `--cache-dir` that `serve` is given, as `check-config` reports it in place of `disk.path`.
@Suite struct ServedCacheDirectoryTests {
    private func choose(flag: String? = nil, environment: [String: String] = [:], config: String) -> String? {
        let state = StateDirectory.choose(flag: nil, configPath: config, environment: environment, workingDirectory: "/home/op")
        return ServedCacheDirectory.choose(flag: flag, environment: environment, stateDirectory: state, workingDirectory: "/home/op")?.path
    }

    @Test func theFlagWinsAndIsTakenFromTheWorkingDirectory() {
        #expect(choose(flag: "cache/", environment: ["CACHE_DIRECTORY": "/x"], config: "/etc/larder/larder.toml") == "/home/op/cache")
    }

    @Test func systemdsCacheDirectoryComesNextWholeAsTheUnitHandsItToServe() {
        #expect(
            choose(environment: ["CACHE_DIRECTORY": "/var/cache/larder:/var/cache/other"], config: "/srv/l.toml")
                == "/var/cache/larder:/var/cache/other")
        #expect(choose(environment: ["CACHE_DIRECTORY": "relative"], config: "/srv/l.toml") == nil)
    }

    @Test func aFileInEtcLarderIsServedWithThePackagedUnitsCacheDirectory() {
        #expect(choose(config: "/etc/larder/larder.toml") == "/var/cache/larder")
        #expect(choose(environment: ["STATE_DIRECTORY": "/var/lib/larder"], config: "/srv/l.toml") == "/var/cache/larder")
    }

    @Test func anyOtherFileKeepsItsDiskPath() {
        #expect(choose(config: "/srv/larder.toml") == nil)
        #expect(choose(config: "conf/larder.toml") == nil)
    }
}

import LarderConfig
import Testing

@testable import LarderServer

/// Each fill setting is read from its own key, once per loaded configuration.
@Suite struct FillSettingsTests {
    /// A change to one key, and the setting that must show it.
    static let cases: [(name: String, change: @Sendable (inout Config) -> Void, shows: @Sendable (FillSettings) -> Bool)] = [
        ("memory.max_object_bytes", { $0.memory.maxObjectBytes = 12_345 }, { $0.maxMemoryObject == 12_345 }),
        ("coalesce.finish_abandoned_max", { $0.coalesce.finishAbandonedMax = 777 }, { $0.finishAbandonedMax == 777 }),
        ("cache.range_whole_max", { $0.cache.rangeWholeMax = 4_096 }, { $0.rangeWholeMax == 4_096 }),
        ("cache.slice_size", { $0.cache.sliceSize = 1_048_576 }, { $0.sliceSize == 1_048_576 }),
        ("cache.admission", { $0.cache.admission = .always }, { $0.admission == .always }),
        ("cache.admission_min_bytes", { $0.cache.admissionMinBytes = 99 }, { $0.admissionMinBytes == 99 }),
        ("cache.stale_if_error", { $0.cache.staleIfError = .milliseconds(2_500) }, { $0.staleIfError == 2.5 }),
        ("cache.negative_ttl", { $0.cache.negativeTTL = .seconds(7) }, { $0.negativeTTL == 7 }),
        ("coalesce.not_shareable_ttl", { $0.coalesce.notShareableTTL = .seconds(3) }, { $0.notShareableTTL == 3_000_000_000 }),
    ]

    @Test(arguments: 0..<cases.count)
    func eachSettingComesFromItsKey(_ index: Int) {
        let (name, change, shows) = Self.cases[index]
        var config = Config()
        change(&config)
        let changed = RuntimeConfig(config: config).fill
        #expect(shows(changed), "\(name)")
        #expect(!shows(RuntimeConfig(config: Config()).fill), "\(name): the default already shows the change")
        #expect(changed != FillSettings(Config()), "\(name)")
    }

    /// A reload builds a new RuntimeConfig: fills started under it read the new values, and
    /// the lookup's negative TTL is the fills' own.
    @Test func aNewConfigurationCarriesNewSettings() {
        var config = Config()
        let before = RuntimeConfig(config: config)
        config.cache.negativeTTL = .seconds(90)
        config.cache.sliceSize = 2_097_152
        let after = RuntimeConfig(config: config, generation: 1)
        #expect(before.fill.negativeTTL != 90)
        #expect(after.fill.negativeTTL == 90 && after.negativeTTL == 90)
        #expect(after.fill.sliceSize == 2_097_152 && before.fill.sliceSize != 2_097_152)
    }
}

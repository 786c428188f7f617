import LarderConfig
import Testing

/// The mistakes an operator makes in a real file, each answered at its own line and column
/// with the table it concerns and the fix.
@Suite(.timeLimit(.minutes(1))) struct ConfigMistakeTests {
    private func headlines(_ text: String) -> [String] {
        switch ConfigLoader.parse(text, file: "t.toml") {
        case .success: []
        case .failure(let failure): failure.errors.map(\.headline)
        }
    }

    @Test func aKeyUnderTheWrongTableIsSentToItsOwn() {
        #expect(
            headlines("[proxy]\npresets = [\"debian\"]\n") == [
                "t.toml:2:1: unknown key 'presets' in [proxy] ('presets' belongs in [cache])"
            ])
        #expect(
            headlines("[proxy]\nmax_object_bytes = \"1MiB\"\n")
                == ["t.toml:2:1: unknown key 'max_object_bytes' in [proxy] ('max_object_bytes' belongs in [memory] or [disk])"])
        #expect(headlines("[cache]\nttl = \"1d\"\n") == ["t.toml:2:1: unknown key 'ttl' in [cache] ('ttl' belongs in a [[route]] table)"])
        // A near miss of another table's key is still named with that table.
        #expect(
            headlines("[upstream]\nmax_conections = 5\n")
                == ["t.toml:2:1: unknown key 'max_conections' in [upstream] (did you mean 'max_connections' in [proxy]?)"])
    }

    @Test func suggestionsStayWithinATypo() {
        // Three edits in seven letters is another word, not a typo of it.
        #expect(Suggestions.closest(to: "presets", in: ["parents"]) == nil)
        #expect(Suggestions.closest(to: "prests", in: ["presets"]) == "presets")
        // Two letters swapped is one slip.
        #expect(Suggestions.closest(to: "retyr", in: ["retry", "route"]) == "retry")
        #expect(Suggestions.closest(to: "stat", in: ["serve", "stats"]) == "stats")
        #expect(Suggestions.closest(to: "log", in: ["tls"]) == nil)
        #expect(
            headlines("[proxy]\nparnets = []\n") == ["t.toml:2:1: unknown key 'parnets' in [proxy] (did you mean 'parents' in [upstream]?)"]
        )
    }

    @Test func aSecondTableHeaderIsTheErrorAndItsKeysStayWithIt() {
        let text = "[proxy]\nworkers = 2\n[log]\nlevel = \"info\"\n[proxy]\nmax_connections = 5\nidle_timeout = \"5s\"\n"
        #expect(
            headlines(text) == [
                "t.toml:5:1: duplicate table [proxy] (first defined at line 1); a table is defined once: move these keys under the first [proxy]"
            ])
        // A key set in both halves is a duplicate of the first; a bad key is judged in [proxy].
        let both = headlines("[proxy]\nworkers = 2\n[log]\n[proxy]\nworkers = 3\nlevle = 1\n")
        #expect(both.count == 3, "\(both)")
        #expect(both.contains("t.toml:5:1: duplicate key 'workers' (first defined at line 2)"), "\(both)")
        #expect(both.contains { $0.hasPrefix("t.toml:6:1: unknown key 'levle' in [proxy]") }, "\(both)")
    }

    @Test func keysAfterABrokenHeaderAreNotGivenToTheTableBefore() {
        #expect(headlines("[log]\n[proxy\nmax_connections = 5\n") == ["t.toml:2:7: expected ']' to close the table header"])
    }

    @Test func aByteOrderMarkIsSkippedAndColumnsCountAfterIt() throws {
        let parsed = try ConfigLoader.parse("\u{FEFF}[proxy]\nworkers = 2\n", file: "t.toml").get()
        #expect(parsed.proxy.workers == 2)
        guard case .failure(let failure) = ConfigLoader.parse("\u{FEFF}[proxx]\n", file: "t.toml") else {
            Issue.record("an unknown table passed")
            return
        }
        #expect(failure.errors.map(\.headline) == ["t.toml:1:1: unknown section [proxx] (did you mean 'proxy'?)"])
        #expect(failure.errors.first?.lineText == "[proxx]", "no invisible character before the caret")
        // Only at the start: elsewhere it is still text that is no key.
        #expect(headlines("[proxy]\n\u{FEFF}workers = 2\n").first?.hasPrefix("t.toml:2:1: expected a key") == true)
    }

    @Test func zeroWorkersIsAnErrorWithTheFix() {
        #expect(
            headlines("[proxy]\nworkers = 0\n") == [
                "t.toml:2:11: 'workers' must be at least 1, got 0; write \"auto\" for one event loop per usable CPU"
            ])
    }

    @Test func anObjectLimitAboveItsTiersSizeIsAnError() throws {
        #expect(
            headlines("[disk]\nmax_bytes = \"1GiB\"\nmax_object_bytes = \"2GiB\"\n") == [
                "t.toml:3:20: disk.max_object_bytes \"2GiB\" is larger than the whole disk tier (disk.max_bytes 1GiB); "
                    + "set it to at most \"1GiB\" or raise disk.max_bytes"
            ])
        #expect(
            headlines("[disk]\nmax_object_bytes = \"20GiB\"\n") == [
                "t.toml:2:20: disk.max_object_bytes \"20GiB\" is larger than the whole disk tier (disk.max_bytes 10GiB); "
                    + "set it to at most \"10GiB\" or raise disk.max_bytes"
            ])
        #expect(
            headlines("[memory]\nmax_object_bytes = \"16MiB\"\nmax_bytes = \"8MiB\"\n") == [
                "t.toml:2:20: memory.max_object_bytes \"16MiB\" is larger than the whole memory tier (memory.max_bytes 8MiB); "
                    + "set it to at most \"8MiB\" or raise memory.max_bytes"
            ])
        // A tier made small on purpose keeps the default object limit: larger objects skip it.
        #expect(
            try ConfigLoader.parse("[memory]\nmax_bytes = \"1KiB\"\n[disk]\nmax_bytes = \"2MiB\"\n", file: "t.toml").get().memory.maxBytes
                == 1024)
        // Equal is possible: one object fills the tier.
        #expect(headlines("[disk]\nmax_bytes = \"1GiB\"\nmax_object_bytes = \"1GiB\"\n").isEmpty)
        // No memory tier: its object limit means nothing.
        #expect(headlines("[memory]\nmax_bytes = \"0B\"\nmax_object_bytes = \"1MiB\"\n").isEmpty)
    }

    @Test func aDiskTierTooSmallForOneSegmentIsAnError() {
        #expect(headlines("[disk]\nmax_bytes = \"0B\"\n").first?.hasPrefix("t.toml:2:13: 'max_bytes' must be between 1MiB and ") == true)
        #expect(headlines("[disk]\nmax_bytes = \"1MiB\"\nmax_object_bytes = \"1MiB\"\n").isEmpty)
    }
}

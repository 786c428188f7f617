import Foundation
import LarderIO
import Testing

@testable import LarderConfig

/// The reload class of every key: one table, held to the decoder's keys and to the documents.
@Suite struct ConfigKeyTableTests {
    private static let root = ConfigLanguageTests.root

    @Test func everyKeyTheDecoderKnowsIsInTheTableOnce() {
        let decoded =
            ConfigDecoder.schema.flatMap { section in section.keys.map { section.section + "." + $0 } }
            + ConfigDecoder.routeKeys.map { "route." + $0 }
        let listed = ConfigKeyTable.entries.map(\.name)
        #expect(Set(decoded).subtracting(listed).isEmpty, "keys without a reload class: \(Set(decoded).subtracting(listed).sorted())")
        #expect(
            Set(listed).subtracting(decoded).isEmpty, "classes for keys that do not exist: \(Set(listed).subtracting(decoded).sorted())")
        #expect(listed.count == Set(listed).count, "a key listed twice")
        #expect(ConfigKeyTable.entries.first { $0.name == "log.level" }?.reload == .live)
    }

    @Test func aReloadKeepsTheRunningValueOfRestartOnlyKeysAndAppliesTheRest() throws {
        let running = Config()
        var loaded = Config()
        loaded.proxy.listen = [try #require(SocketAddress(parsing: "127.0.0.1:8080"))]
        loaded.log.level = .debug
        loaded.memory.maxBytes = 1 << 20
        loaded.disk.required = true
        let changed = ConfigKeyTable.restartChanges(from: running, to: loaded)
        #expect(changed.map(\.name) == ["proxy.listen", "disk.required"])
        #expect(changed.first?.value(in: loaded) == "127.0.0.1:8080")
        #expect(changed.first?.value(in: running) == "127.0.0.1:3128")
        let applied = ConfigKeyTable.keepingRestartOnly(loaded, from: running)
        #expect(applied.proxy.listen == running.proxy.listen && applied.disk.required == nil)
        #expect(applied.log.level == .debug && applied.memory.maxBytes == 1 << 20)
        #expect(ConfigKeyTable.restartChanges(from: running, to: applied).isEmpty)
    }

    /// config/larder.toml says "restart to change" on exactly the restart-only keys' lines.
    @Test func theDocumentedDefaultsFileMarksExactlyTheRestartOnlyKeys() throws {
        let text = try String(contentsOfFile: Self.root + "/config/larder.toml", encoding: .utf8)
        var section = ""
        var marked: [String] = []
        var seen = 0
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") && !line.hasPrefix("[[") {
                section = String(line.dropFirst().prefix { $0 != "]" })
            } else if let equals = line.range(of: " = "), !line.hasPrefix("#"), !line.hasPrefix(" ") {
                seen += 1
                let key = section + "." + line[..<equals.lowerBound]
                if line.contains("restart to change") { marked.append(key) }
            }
        }
        #expect(seen > 50, "the file's keys were read")
        #expect(Set(marked) == Set(ConfigKeyTable.restartOnly.map(\.name)), "marked: \(marked.sorted())")
    }

    /// config/larder.toml sets every key of the table, in the table's order, and its commented
    /// `[[route]]` examples show every route key: the documented file and the table (which the
    /// decoder takes its keys from) cannot drift. The values are the compiled defaults
    /// (`ConfigLanguageTests.documentedDefaultsFileEqualsCompiledDefaults`).
    @Test func theDocumentedDefaultsFileSetsEveryKeyOfTheTableInItsOrder() throws {
        let text = try String(contentsOfFile: Self.root + "/config/larder.toml", encoding: .utf8)
        var section = ""
        var set: [String] = []
        var routeExamples: Set<String> = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") && !line.hasPrefix("[[") {
                section = String(line.dropFirst().prefix { $0 != "]" })
            } else if let equals = line.range(of: " = "), !line.hasPrefix("#"), !line.hasPrefix(" ") {
                set.append(section + "." + line[..<equals.lowerBound])
            } else if line.hasPrefix("# "), let equals = line.range(of: " = "), section == "tls" {
                // After [tls] only the route examples are commented `# key = value` lines.
                let key = line.dropFirst(2)[..<equals.lowerBound]
                if key.allSatisfy({ $0.isLetter || $0 == "_" }) { routeExamples.insert("route." + key) }
            }
        }
        let table = ConfigKeyTable.entries.map(\.name)
        #expect(
            set == table.filter { !$0.hasPrefix("route.") }, "missing: \(Set(table).subtracting(set).filter { !$0.hasPrefix("route.") })")
        let routeKeys = Set(table.filter { $0.hasPrefix("route.") })
        let retryKeys = Set(ConfigDecoder.retryKeys.map { "route." + $0 })
        #expect(routeExamples.subtracting(retryKeys) == routeKeys, "route keys without an example: \(routeKeys.subtracting(routeExamples))")
    }

    /// config/larder.toml writes each key's default as the table has it, and the table's help
    /// is the file's comment for the key: the one after the value with its continuation lines,
    /// or for a key without one, the comment lines just above it.
    @Test func theDocumentedDefaultsFileWritesEachKeysDefaultAndHelpFromTheTable() throws {
        let text = try String(contentsOfFile: Self.root + "/config/larder.toml", encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var section = ""
        var above: [String] = []
        var documented: [String: (value: String, help: String)] = [:]
        for (index, line) in lines.enumerated() {
            if line.hasPrefix("[") && !line.hasPrefix("[[") {
                section = String(line.dropFirst().prefix { $0 != "]" })
                above = []
            } else if line.hasPrefix("# ") {
                above.append(String(line.dropFirst(2)))
            } else if let equals = line.range(of: " = "), !line.hasPrefix(" "), !section.isEmpty {
                let rest = line[equals.upperBound...]
                var help: [String] = []
                var value = rest.trimmingCharacters(in: .whitespaces)
                if let comment = rest.range(of: #"\s+# "#, options: .regularExpression) {
                    value = String(rest[..<comment.lowerBound])
                    help.append(String(rest[comment.upperBound...]))
                }
                for next in lines[(index + 1)...] {
                    guard let mark = next.range(of: #"^ +# "#, options: .regularExpression) else { break }
                    help.append(String(next[mark.upperBound...]))
                }
                documented[section + "." + line[..<equals.lowerBound]] = (value, (help.isEmpty ? above : help).joined(separator: " "))
                above = []
            } else if line.isEmpty {
                above = []
            }
        }
        let keys = ConfigKeyTable.entries.filter { !$0.name.hasPrefix("route.") }
        #expect(documented.count == keys.count, "keys in the file: \(documented.count)")
        for entry in keys {
            let written = try #require(documented[entry.name], "\(entry.name) is not in the file")
            #expect(written.value == entry.defaultValue, "\(entry.name): the file writes \(written.value)")
            #expect(written.help == entry.help, "\(entry.name): the file says \(written.help)")
            #expect(!entry.help.isEmpty, "\(entry.name) has no help")
        }
        // A key taking one of a few words names each in its help: a word added to the enum
        // and left out of the file fails here.
        for entry in keys {
            guard case .choice(let words) = entry.type else { continue }
            #expect(words.allSatisfy { entry.help.contains($0) }, "\(entry.name): \(words) in \(entry.help)")
        }
        // The help of cache.presets names every preset, as the decoder's error does.
        let presets = try #require(ConfigKeyTable.entries.first { $0.name == "cache.presets" }).help
        #expect(Preset.allCases.allSatisfy { presets.contains($0.rawValue) }, "\(presets)")
        for entry in ConfigKeyTable.entries where entry.name.hasPrefix("route.") {
            #expect(entry.defaultValue.isEmpty && !entry.help.isEmpty, "\(entry.name)")
        }
    }

    /// Each key's type admits its default as the file writes it, and the decoder refuses a
    /// value of another kind for the key (a boolean, or a number for a boolean key).
    @Test func eachKeysTypeAdmitsItsDefaultAndTheDecoderRefusesAnotherKind() throws {
        for entry in ConfigKeyTable.entries {
            let section = String(entry.name.prefix { $0 != "." })
            let key = entry.name.dropFirst(section.count + 1)
            let header = section == "route" ? "[[route]]\nmatch = \"http://example.org/*\"\n" : "[\(section)]\n"
            if section != "route" {
                let parsed = ConfigParser.parse(header + "\(key) = \(entry.defaultValue)\n", file: "t.toml")
                let value = try #require(parsed.document.tables.first?.entries.first?.value, "\(entry.name)")
                #expect(parsed.errors.isEmpty && entry.type.admits(value.kind), "\(entry.name) = \(entry.defaultValue) as \(entry.type)")
            }
            guard key != "match" else { continue }
            let wrong: String
            switch entry.type {
            case .bool, .boolOrAuto: wrong = "5"
            default: wrong = "true"
            }
            let parsedWrong = ConfigParser.parse(header + "\(key) = \(wrong)\n", file: "t.toml")
            let wrongValue =
                section == "route"
                ? parsedWrong.document.arrays.first?.elements.first?.entries.last?.value
                : parsedWrong.document.tables.first?.entries.first?.value
            #expect(wrongValue.map { !entry.type.admits($0.kind) } == true, "\(entry.name) admits \(wrong)")
            guard case .failure = ConfigLoader.parse(header + "\(key) = \(wrong)\n", file: "t.toml") else {
                Issue.record("\(entry.name) = \(wrong) decodes, yet its type is \(entry.type)")
                continue
            }
        }
    }

    /// The decoder takes its sections and keys from the table: a key the table lacks is
    /// refused, and every key the table has is decoded (none falls to "is not handled").
    @Test func theDecoderAcceptsExactlyTheTablesKeys() throws {
        #expect(
            ConfigDecoder.schema.map(\.section) == [
                "proxy", "admin", "memory", "disk", "upstream", "retry", "cache", "coalesce", "log", "tls",
            ])
        #expect(ConfigDecoder.retryKeys.contains("max_attempts") && ConfigDecoder.retryKeys.count == 9)
        let unknown = ConfigLoader.parse("[proxy]\nlisten_address = \"127.0.0.1:1\"\n", file: "t.toml")
        guard case .failure(let errors) = unknown else {
            Issue.record("a key outside the table was accepted")
            return
        }
        #expect(errors.errors.first?.message.contains("unknown key 'listen_address'") == true, "\(errors.errors)")
    }

    /// docs/OPERATIONS.md lists the restart-only keys on one line.
    @Test func theOperationsGuideListsTheRestartOnlyKeys() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/OPERATIONS.md", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Restart-only keys:") })
        let names = line.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        #expect(names == ConfigKeyTable.restartOnly.map(\.name), "in the table's order")
    }
}

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

    /// docs/OPERATIONS.md lists the restart-only keys on one line.
    @Test func theOperationsGuideListsTheRestartOnlyKeys() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/OPERATIONS.md", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Restart-only keys:") })
        let names = line.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        #expect(names == ConfigKeyTable.restartOnly.map(\.name), "in the table's order")
    }
}

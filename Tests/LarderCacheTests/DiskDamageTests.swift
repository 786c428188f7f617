import Foundation
import Glibc
import LarderHTTP
import LarderIO
import Testing

@testable import LarderCache

/// A damaged disk under segment records around the size the first read takes whole (4 KiB):
/// whatever is done to a record's bytes, a read answers nothing or exactly the body stored,
/// never other bytes, and never traps. Three records, the middle one damaged.
@Suite(.timeLimit(.minutes(2))) struct DiskDamageTests {
    /// A stored record: its body's seed, where it is in the segment, its length.
    struct Record {
        let path: String
        let seed: UInt8
        let offset: Int
        let length: Int
    }

    /// What is done to the segment (its fixture's only one), given the three records.
    typealias Damage = (_ fixture: DiskFixture, _ segment: String, _ records: [Record], _ bodySize: Int) throws -> Void

    /// The length of the record of a body of `bodySize` bytes stored under `/a`.
    private static func recordLength(bodySize: Int) throws -> Int {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/a", 1)], size: bodySize)
        let entry = try #require(fixture.cache.index.withLock { $0.lookup(Fixtures.key("/a")) }.first)
        return Int(entry.size)
    }

    /// Stores three records of `bodySize`, reads each (kept descriptors, page cache), applies
    /// `damage`, then reads each twice: returns whether the middle record was served.
    @discardableResult
    private func check(_ label: String, bodySize: Int, _ damage: Damage) throws -> Bool {
        let fixture = try DiskFixture()
        let stored = [("/a", UInt8(1)), ("/b", UInt8(2)), ("/c", UInt8(3))]
        storeInline(fixture, stored, size: bodySize)
        let segment = try #require(fixture.segmentFiles().first)
        let records = try stored.map { path, seed in
            let entry = try #require(fixture.cache.index.withLock { $0.lookup(Fixtures.key(path)) }.first)
            return Record(path: path, seed: seed, offset: Int(entry.offset), length: Int(entry.size))
        }
        for record in records { #expect(fixture.read(record.path) == pattern(bodySize, seed: record.seed)) }
        try damage(fixture, segment, records, bodySize)
        var middleServed = false
        for _ in 0..<2 {
            for record in records {
                guard let body = fixture.read(record.path) else { continue }
                // Compared first: a failure names the record, not two arrays of thousands of bytes.
                let exact = body == pattern(bodySize, seed: record.seed)
                #expect(exact, "\(label): \(record.path) served \(body.count) other bytes")
                if record.path == "/b" { middleServed = true }
            }
        }
        return middleServed
    }

    /// Sets preamble field `name` (a number in fixed-width digits) of the record at `offset`.
    private static func setField(_ name: String, in bytes: inout Data, at offset: Int, to value: (Int) -> Int) throws {
        let preamble = Array(bytes[offset..<(offset + DiskEntryFormat.preambleLength)])
        let text = String(decoding: preamble, as: UTF8.self)
        let label = try #require(text.range(of: name + " "))
        let start = text.utf8.distance(from: text.startIndex, to: label.upperBound)
        let end = try #require(preamble[start...].firstIndex(of: 10))
        let old = try #require(Int(String(decoding: preamble[start..<end], as: UTF8.self)))
        let digits = String(value(old))
        let width = end - start
        try #require(digits.count <= width)
        let field = Data((String(repeating: "0", count: width - digits.count) + digits).utf8)
        bytes.replaceSubrange((offset + start)..<(offset + end), with: field)
    }

    @Test(arguments: [500, -4096, -4097])
    func noDamageServesOtherBytes(size: Int) throws {
        // A negative size: a body that makes a record of exactly that many bytes.
        let bodySize = size > 0 ? size : -size - (try Self.recordLength(bodySize: 100) - 100)
        if size < 0 { #expect(try Self.recordLength(bodySize: bodySize) == -size) }
        let flips: [(String, (Record) -> Int)] = [
            ("the body's last byte", { $0.offset + $0.length - 1 }),
            ("the body's first byte", { $0.offset + $0.length - bodySize }),
            ("a byte of the head", { $0.offset + DiskEntryFormat.preambleLength + 5 }),
        ]
        for (what, at) in flips {
            let served = try check("\(bodySize): \(what) flipped", bodySize: bodySize) { fixture, _, records, _ in
                try editFirstSegment(fixture) { $0[at(records[1])] ^= 0x01 }
            }
            #expect(!served, "\(bodySize): a record with \(what) flipped is dropped")
        }
        let lies: [(String, String, (Int) -> Int)] = [
            ("body-length", "head-length", { $0 - 1 }), ("head-length", "body-length", { $0 - 1 }),
        ]
        for (shrunk, grown, change) in lies {
            // The record's length stays, the line between head and body moves.
            let served = try check("\(bodySize): \(shrunk) - 1, \(grown) + 1", bodySize: bodySize) { fixture, _, records, _ in
                try editFirstSegment(fixture) { bytes in
                    try Self.setField(shrunk, in: &bytes, at: records[1].offset, to: change)
                    try Self.setField(grown, in: &bytes, at: records[1].offset) { $0 + 1 }
                }
            }
            #expect(!served)
        }
        let replaced: [(String, Damage)] = [
            (
                "head-length 5000",
                { fixture, _, records, _ in
                    try editFirstSegment(fixture) { try Self.setField("head-length", in: &$0, at: records[1].offset) { _ in 5000 } }
                }
            ),
            (
                "the page of its end zeroed",
                { fixture, _, records, _ in
                    try editFirstSegment(fixture) { bytes in
                        let page = (records[1].offset + records[1].length - 1) / 4096 * 4096
                        bytes.replaceSubrange(page..<min(bytes.count, page + 4096), with: Data(count: 4096))
                    }
                }
            ),
            (
                "another record's bytes in its place",
                { fixture, _, records, _ in
                    try editFirstSegment(fixture) { bytes in
                        let other = bytes[records[0].offset..<(records[0].offset + records[0].length)]
                        bytes.replaceSubrange(records[1].offset..<(records[1].offset + records[1].length), with: other)
                    }
                }
            ),
        ]
        for (what, damage) in replaced {
            let served = try check("\(bodySize): \(what)", bodySize: bodySize, damage)
            #expect(!served, "\(bodySize): a record with \(what) is dropped")
        }
        let cuts: [(String, (Record, Int) -> Int)] = [
            ("inside its body", { record, bodySize in record.offset + record.length - bodySize / 2 }),
            ("one byte short", { record, _ in record.offset + record.length - 1 }),
            ("inside its head", { record, _ in record.offset + DiskEntryFormat.preambleLength + 20 }),
        ]
        for (what, at) in cuts {
            for refilled in [false, true] {
                let served = try check("\(bodySize): cut \(what)\(refilled ? ", zeros after" : "")", bodySize: bodySize) {
                    _, segment, records, bodySize in
                    let whole = fileSize(segment)
                    truncate(segment, off_t(at(records[1], bodySize)))
                    if refilled { truncate(segment, off_t(whole)) }
                }
                #expect(!served, "\(bodySize): a record cut \(what) is never served")
            }
        }
    }
}

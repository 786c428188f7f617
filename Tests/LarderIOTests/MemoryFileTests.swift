import Glibc
import Testing

@testable import LarderIO

/// Anonymous memory files (the memory tier's large bodies): sealed once filled, so that their
/// read-only mappings can never see other bytes nor fault past the end, and mapped only while
/// the budget has mappings left.
@Suite(.timeLimit(.minutes(1))) struct MemoryFileTests {
    @Test func aMemoryFileIsSealedAndItsMappingHoldsItsBytes() throws {
        let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let file = try #require(OpenFile.anonymous(copying: bytes, budget: MemoryFileBudget(limit: 2)))
        let mapped = try #require(file.mapped)
        #expect(Array(mapped) == bytes)
        #expect(ftruncate(file.fd, 10) == -1 && errno == EPERM, "shrinking a sealed file")
        #expect(ftruncate(file.fd, 1 << 20) == -1 && errno == EPERM, "growing a sealed file")
        var byte: UInt8 = 0
        #expect(pwrite(file.fd, &byte, 1, 5) == -1 && errno == EPERM, "writing a sealed file")
        #expect(Array(mapped) == bytes)
        #expect(try FileSystem.read(file.fd, at: 0, count: bytes.count) == bytes)
    }

    @Test func filesPastTheMappingLimitAreNotMappedAndAFreedMappingIsReused() throws {
        let budget = MemoryFileBudget(limit: 4, mappingLimit: 1)
        let bytes = [UInt8](repeating: 3, count: 40_000)
        var first = OpenFile.anonymous(copying: bytes, budget: budget)
        let second = try #require(OpenFile.anonymous(copying: bytes, budget: budget))
        #expect(first?.mapped != nil && second.mapped == nil)
        #expect(budget.mappedCount == 1 && budget.count == 2)
        #expect(try FileSystem.read(second.fd, at: 0, count: bytes.count) == bytes, "an unmapped file is whole")
        first = nil
        #expect(budget.mappedCount == 0 && budget.count == 1)
        let third = try #require(OpenFile.anonymous(copying: bytes, budget: budget))
        #expect(third.mapped.map { Array($0) } == bytes)
        #expect(budget.mappedCount == 1)
    }

    @Test func anEmptyFileIsNotMapped() throws {
        let budget = MemoryFileBudget(limit: 1)
        let file = try #require(OpenFile.anonymous(copying: [], budget: budget))
        #expect(file.mapped == nil && budget.mappedCount == 0)
    }
}

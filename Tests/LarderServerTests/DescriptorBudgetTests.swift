import Testing

@testable import LarderServer

/// Whether an open-file limit is short of what `proxy.max_connections` needs.
@Suite struct DescriptorBudgetTests {
    @Test func twiceTheConnectionsIsNotShortAndLeavesRoomForUpstreams() {
        // The defaults (10 GiB disk: 648 segment files) under a hard limit of 20000.
        let budget = DescriptorBudget(limit: 20_000, maxConnections: 10_000, segments: 648, memoryFiles: 2_500, entryFiles: 1_024)
        #expect(!budget.isShort)
        #expect(budget.clients == 10_000)
        #expect(budget.upstreams == 20_000 - 10_000 - 648 - 2_500 - 1_024 - DescriptorBudget.fixed)
    }

    @Test func aLimitBelowTheClientsAndStandingFilesIsShort() {
        let budget = DescriptorBudget(limit: 8_000, maxConnections: 10_000, segments: 648, memoryFiles: 1_000)
        #expect(budget.isShort)
        #expect(budget.clients == 8_000 - 648 - 1_000 - DescriptorBudget.fixed)
        #expect(budget.upstreams == 0)
        let exact = DescriptorBudget(limit: 10_000 + 648 + DescriptorBudget.fixed, maxConnections: 10_000, segments: 648, memoryFiles: 0)
        #expect(!exact.isShort && exact.upstreams == 0)
    }

    @Test func anUnlimitedLimitIsNeverShort() {
        let budget = DescriptorBudget(limit: Int.max, maxConnections: 1_000_000, segments: 65_536, memoryFiles: 65_536)
        #expect(!budget.isShort && budget.clients == 1_000_000 && budget.upstreams == 1_000_000)
    }
}

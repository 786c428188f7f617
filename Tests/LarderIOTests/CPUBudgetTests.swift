import LarderIO
import Testing

/// `proxy.workers = "auto"`: the CPUs the process may use, capped by its cgroup's quota.
@Suite(.timeLimit(.minutes(1))) struct CPUBudgetTests {
    @Test func quotaFilesReadBothCgroupVersions() {
        #expect(CPUBudget.quota(cpuMax: "150000 100000\n") == 1.5)
        #expect(CPUBudget.quota(cpuMax: "max 100000\n") == nil)
        #expect(CPUBudget.quota(cpuMax: "") == nil)
        #expect(CPUBudget.quota(cfsQuota: "200000\n", period: "100000\n") == 2)
        #expect(CPUBudget.quota(cfsQuota: "-1\n", period: "100000\n") == nil)
    }

    @Test func everyAncestorCgroupCounts() {
        let v2 = CPUBudget.quotaFiles(procSelfCgroup: "0::/system.slice/larder.service\n", root: "/cg")
        #expect(v2.map(\.path) == ["/cg/system.slice/larder.service/cpu.max", "/cg/system.slice/cpu.max", "/cg/cpu.max"])
        let v1 = CPUBudget.quotaFiles(procSelfCgroup: "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n", root: "/cg")
        #expect(
            v1.filter { !$0.isV2 }.map(\.path) == [
                "/cg/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "/cg/cpu,cpuacct/docker/cpu.cfs_quota_us",
                "/cg/cpu,cpuacct/cpu.cfs_quota_us",
            ])
        #expect(v1.filter { !$0.isV2 }.first?.periodPath == "/cg/cpu,cpuacct/docker/abc/cpu.cfs_period_us")
        #expect(v1.filter(\.isV2).map(\.path) == ["/cg/cpu.max"])
    }

    @Test func theTightestLimitWinsAndAtLeastOneLoopRuns() {
        #expect(CPUBudget.budget(affinity: 16, quotas: []) == 16)
        #expect(CPUBudget.budget(affinity: 16, quotas: [4, 1.5]) == 2)
        #expect(CPUBudget.budget(affinity: 2, quotas: [8]) == 2)
        #expect(CPUBudget.budget(affinity: 4, quotas: [0.2]) == 1)
        #expect(CPUBudget.budget(affinity: 0, quotas: []) == 1)
    }
}

import Foundation
import LarderIO
import Testing

/// Which memory-tier bodies go out with `sendfile`: decided from what the kernel says of its
/// indirect calls.
@Suite struct IndirectCallsTests {
    @Test(arguments: [
        ("Mitigation: Retpolines; IBPB: conditional; IBRS_FW; STIBP: disabled; RSB filling; PBRSB-eIBRS: Not affected\n", true),
        ("Mitigation: Enhanced / Automatic IBRS; IBPB: conditional; PBRSB-eIBRS: SW sequence; BHI: Vulnerable\n", false),
        ("Mitigation: Enhanced / Automatic IBRS + Retpolines; IBPB: conditional\n", true),
        ("Mitigation: Full generic retpoline, IBPB: conditional, IBRS_FW, STIBP: disabled, RSB filling\n", true),
        ("Mitigation: Full AMD retpoline, IBPB: conditional, STIBP: disabled, RSB filling\n", true),
        ("Vulnerable: Minimal generic ASM retpoline\n", true),
        ("Mitigation: LFENCE; IBPB: conditional; STIBP: disabled; RSB filling\n", true),
        ("Mitigation: Enhanced / Automatic IBRS + LFENCE; IBPB: conditional\n", true),
        ("Mitigation: IBRS; IBPB: always-on\n", false),
        ("Not affected\n", false),
        ("Vulnerable\n", false),
        ("Mitigation: CSV2, BHB\n", false),
    ])
    func theKernelsLineSaysWhetherIndirectCallsAreRetpolines(line: String, retpolines: Bool) {
        #expect(IndirectCalls.areRetpolines(mitigation: line) == retpolines)
    }

    @Test func noLineIsUnknown() {
        #expect(IndirectCalls.areRetpolines(mitigation: nil) == nil)
        #expect(IndirectCalls.areRetpolines(mitigation: "") == nil)
        #expect(IndirectCalls.areRetpolines(mitigation: "\n") == nil)
    }

    /// The running kernel's answer is its file's: whatever this host is.
    @Test func theRunningKernelIsAskedThroughSysfs() {
        let text = try? String(contentsOfFile: IndirectCalls.mitigationPath, encoding: .utf8)
        let line = text.flatMap { $0.split(separator: "\n").first }?.lowercased()
        #expect(IndirectCalls.areRetpolines == line.map { $0.contains("retpoline") || $0.contains("lfence") })
    }

    /// Bodies over 1 MiB get memory files only where indirect calls are known not to be
    /// retpolines; 32 KiB is the floor everywhere.
    @Test func memoryFileSizesFollowTheKernel() {
        #expect(MemoryFileBudget.fileSizes(retpolines: true) == 32 * 1024..<1024 * 1024)
        #expect(MemoryFileBudget.fileSizes(retpolines: nil) == 32 * 1024..<1024 * 1024)
        #expect(MemoryFileBudget.fileSizes(retpolines: false) == 32 * 1024..<Int.max)
        let budget = MemoryFileBudget(limit: 4)
        #expect(budget.fileSizes == MemoryFileBudget.sizesWithRetpolines)
        budget.fileSizes = MemoryFileBudget.fileSizes(retpolines: false)
        #expect(budget.fileSizes.contains(10 << 20) && !budget.fileSizes.contains(32 * 1024 - 1))
        budget.fileSizes = 0..<10
        #expect(budget.fileSizes.isEmpty, "a bound under the floor holds nothing")
    }
}

/// What the running kernel makes an indirect call cost, as far as the choice between
/// `sendfile(2)` and a copy goes: `sendfile` works per 4 KiB page (a page-cache lookup, a pipe
/// buffer, a socket fragment), each step an indirect call. Where the kernel's Spectre v2
/// mitigation routes those calls through retpolines, that work costs more than one copy of a
/// body over 1 MiB; with enhanced IBRS, or on CPUs that need no such mitigation, it costs less
/// (docs/PERFORMANCE.md, "Design choices").
public enum IndirectCalls {
    /// Where the kernel says how it mitigates Spectre v2.
    public static let mitigationPath = "/sys/devices/system/cpu/vulnerabilities/spectre_v2"

    /// Whether the kernel's indirect calls are retpolines, or otherwise fenced, from its
    /// mitigation line: `Mitigation: Retpolines` (and before Linux 5.17 `Full generic
    /// retpoline`, `Full AMD retpoline`, `Minimal generic ASM retpoline`), `LFENCE` (AMD's
    /// variant, alone or after enhanced IBRS) all count; `Enhanced / Automatic IBRS`, `IBRS`,
    /// `Not affected`, `Vulnerable` do not. Nil (unknown) when there is no line.
    public static func areRetpolines(mitigation: String?) -> Bool? {
        guard let line = mitigation?.split(separator: "\n").first, !line.isEmpty else { return nil }
        let lowered = line.lowercased()
        return lowered.contains("retpoline") || lowered.contains("lfence")
    }

    /// Whether the running kernel's indirect calls are retpolines; nil when it does not say
    /// (no such file, as in some containers and on kernels before 4.15).
    public static var areRetpolines: Bool? {
        areRetpolines(mitigation: try? String(decoding: FileSystem.readWhole(mitigationPath, limit: 4 << 10), as: UTF8.self))
    }
}

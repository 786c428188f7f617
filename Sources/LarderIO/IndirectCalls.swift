/// What the running kernel makes an indirect call cost, as far as the choice between
/// `sendfile(2)` and a copy goes: `sendfile` works per 4 KiB page (a page-cache lookup, a pipe
/// buffer, a socket fragment), each step an indirect call. Where the kernel's Spectre v2
/// mitigation routes those calls through retpolines, that work costs more than one copy of a
/// body over 1 MiB; with enhanced IBRS, or on CPUs that need no such mitigation, it costs less
/// (docs/PERFORMANCE.md, "Design choices").
public enum IndirectCalls {
    /// Where the kernel says how it mitigates Spectre v2.
    public static let mitigationPath = "/sys/devices/system/cpu/vulnerabilities/spectre_v2"

    /// Whether the kernel's indirect calls are retpolines, from its mitigation line
    /// (`Mitigation: Retpolines`, `Mitigation: Enhanced / Automatic IBRS`, `Not affected`...);
    /// nil (unknown) when there is no line.
    public static func areRetpolines(mitigation: String?) -> Bool? {
        guard let line = mitigation?.split(separator: "\n").first, !line.isEmpty else { return nil }
        return line.contains("Retpoline")
    }

    /// Whether the running kernel's indirect calls are retpolines; nil when it does not say
    /// (no such file, as in some containers and on kernels before 4.15).
    public static var areRetpolines: Bool? {
        areRetpolines(mitigation: try? String(decoding: FileSystem.readWhole(mitigationPath, limit: 4 << 10), as: UTF8.self))
    }
}

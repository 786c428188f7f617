/// The plain-text form of a tool's setup, as `larder client` prints it (the onboarding page
/// shows the same parts as HTML).
extension ClientTool {
    /// The setup as text lines of at most about `width` columns (file contents and commands
    /// are never wrapped, so they can be copied as they are).
    public func text(width: Int = 78) -> String {
        var out = ["== \(title) [\(name)] =="]
        out += ClientTool.wrapped(explanation, width: width)
        if !environment.isEmpty {
            out.append("Environment:")
            out += environment.map { "  export \($0.name)=\(ClientSetup.shellQuoted($0.value))" }
        }
        for file in files {
            let how: String
            switch file.placement {
            case .dropIn: how = "written by --apply"
            case .wholeFile: how = "written by --apply if absent"
            case .byHand: how = "add by hand"
            }
            out.append("File \(file.path) (\(how); undo: \(file.undo)):")
            switch file.content {
            case .text(let text) where text.hasPrefix("-----BEGIN CERTIFICATE-----") && file.path != ClientSetup.caFile:
                out.append("  | (Larder's CA certificate: the same PEM as \(ClientSetup.caFile))")
            case .text(let text):
                out += text.split(separator: "\n", omittingEmptySubsequences: false).dropLast(text.hasSuffix("\n") ? 1 : 0).map {
                    "  | " + $0
                }
            case .concatenation(let parts):
                out.append("  | (the system's certificates, then Larder's CA: cat \(parts.joined(separator: " ")) > \(file.path))")
            }
        }
        if !commands.isEmpty {
            out.append("Then run:")
            out += commands.map { "  " + $0 }
        }
        // Notes often end in a command to copy: they stay on one line.
        out += notes.map { "Note: " + $0 }
        return out.joined(separator: "\n")
    }

    /// `text` broken at spaces into lines of at most `width` characters (a longer word stays
    /// whole); also lays out `larder client`'s help.
    public static func wrapped(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}

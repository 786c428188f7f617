/// One file of a client's setup: where it goes, what it holds, and how it is taken back.
public struct SetupFile: Sendable, Equatable {
    /// What the file holds.
    public enum Content: Sendable, Equatable {
        /// This text, as is.
        case text(String)
        /// These files, one after the other, read when the file is written (the combined CA
        /// bundle: the system store's certificates, then Larder's CA). The generator reads
        /// nothing; whoever writes the file reads the parts, on the machine it is written on.
        case concatenation([String])
    }

    /// How safely the file can be written by `larder client --apply`.
    public enum Placement: Sendable, Equatable {
        /// A file of Larder's own in a directory the tool reads whole (`apt.conf.d`,
        /// `profile.d`, a systemd drop-in directory): written, and removed by `--undo`.
        case dropIn
        /// A whole configuration file that the tool reads from one path (`/etc/gitconfig`):
        /// written only when no such file exists yet, since Larder never edits one in place.
        case wholeFile
        /// A user's own file (`~/.curlrc`, `~/.npmrc`): shown, to be merged by hand, never written.
        case byHand
    }

    /// The absolute path on the client machine (`~` for the user's home, `.byHand` only).
    public var path: String
    public var content: Content
    /// The file's permission bits: 0o644, or 0o755 for a hook that is run.
    public var mode: UInt32
    public var placement: Placement
    /// What takes the file back, for a person ("rm PATH, then update-ca-certificates --fresh").
    public var undo: String
    /// What to run once the file is gone (`update-ca-certificates --fresh`), if anything: what
    /// `larder client --undo` lists after removing it, since removing is all it does itself.
    public var afterRemoval: String?

    /// `undo` defaults to removing the file, then `afterRemoval`.
    public init(
        path: String, content: Content, mode: UInt32 = 0o644, placement: Placement = .dropIn, undo: String? = nil,
        afterRemoval: String? = nil
    ) {
        self.path = path
        self.content = content
        self.mode = mode
        self.placement = placement
        self.afterRemoval = afterRemoval
        self.undo = undo ?? "rm \(path)" + (afterRemoval.map { ", then " + $0 } ?? "")
    }

    /// Whether `larder client --apply` writes this file.
    public var isApplied: Bool { placement != .byHand }
}

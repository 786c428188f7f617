/// The facts about a client machine that its setup depends on: where its system CA store is,
/// how the store is refreshed, and so how Larder's combined bundle is kept in step with it.
public struct ClientPlatform: Sendable, Equatable {
    /// The families whose CA stores Larder knows.
    public enum Family: String, Sendable, CaseIterable {
        /// Debian, Ubuntu and derivatives: ca-certificates with `update-ca-certificates`.
        case debian
        /// RHEL, Fedora, CentOS, Rocky, Alma, Amazon Linux: p11-kit with `update-ca-trust`.
        case rhel
    }

    public var family: Family
    /// The single-file PEM bundle of every certificate the system trusts.
    public var systemBundle: String
    /// The directory where a local CA is dropped to join the system store.
    public var anchorDirectory: String
    /// The file name Larder's CA takes there (Debian's tool reads only `*.crt`).
    public var anchorFile: String
    /// The command that rebuilds the system store from the anchors.
    public var updateCommand: String

    public static let debian = ClientPlatform(
        family: .debian, systemBundle: "/etc/ssl/certs/ca-certificates.crt",
        anchorDirectory: "/usr/local/share/ca-certificates", anchorFile: "larder.crt",
        updateCommand: "update-ca-certificates")

    public static let rhel = ClientPlatform(
        family: .rhel, systemBundle: "/etc/pki/tls/certs/ca-bundle.crt",
        anchorDirectory: "/etc/pki/ca-trust/source/anchors", anchorFile: "larder.pem",
        updateCommand: "update-ca-trust")

    /// The platform of `family`.
    public static func of(_ family: Family) -> ClientPlatform {
        switch family {
        case .debian: .debian
        case .rhel: .rhel
        }
    }

    /// The family whose marker files exist, asked through `exists` (a path → whether it is
    /// there), so that the caller decides which file system (a `--root`) it looks at.
    public static func detect(exists: (String) -> Bool) -> ClientPlatform? {
        if exists(ClientPlatform.debian.systemBundle) || exists("/etc/debian_version") { return .debian }
        if exists(ClientPlatform.rhel.systemBundle) || exists("/etc/redhat-release") { return .rhel }
        return nil
    }
}

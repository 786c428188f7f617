/// One tool's setup as the onboarding page shows it: a title and text shown verbatim
/// (commands, or a file's content with where it goes).
public struct SetupSection: Sendable, Equatable {
    public let title: String
    public let text: String

    public init(title: String, text: String) {
        self.title = title
        self.text = text
    }
}

/// Where the onboarding page's per-tool setup comes from: the generator `larder client`
/// prints from, so the page and the command never disagree.
public protocol SetupInstructions: Sendable {
    /// The sections for a machine that reaches the proxy at `proxyURL` (`http://host:port`)
    /// and can download the CA certificate (PEM) from `caURL`; nil when HTTPS is not intercepted.
    func sections(proxyURL: String, caURL: String?) -> [SetupSection]
}

/// No per-tool section: the page still has the proxy variables, the PAC file and the CA.
struct NoSetupInstructions: SetupInstructions {
    func sections(proxyURL: String, caURL: String?) -> [SetupSection] { [] }
}

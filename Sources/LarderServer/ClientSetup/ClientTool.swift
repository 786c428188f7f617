/// The setup of one client tool for this proxy, as data: what a person reads, the environment
/// to set, the files to write and the commands to run afterwards. `larder client` prints it and
/// applies it, and the onboarding page shows it.
public struct ClientTool: Sendable, Equatable {
    /// One environment variable.
    public struct Variable: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The short name `--tool` takes (`apt`, `pip`, `docker`).
    public var name: String
    /// The title shown above it ("apt (Debian, Ubuntu)").
    public var title: String
    /// A few sentences: what this setup does and what it leaves alone.
    public var explanation: String
    /// Variables to set in the environment of the tool (a shell profile, a CI job, a unit).
    public var environment: [Variable] = []
    /// Files to write, each with how to take it back.
    public var files: [SetupFile] = []
    /// Commands to run once the files are written, in order.
    public var commands: [String] = []
    /// Caveats: what the setup cannot do, or what the operator must still decide.
    public var notes: [String] = []
    /// Other tools whose files this one's refer to (`ca-bundle`), applied with it.
    public var requires: [String] = []

    public init(name: String, title: String, explanation: String) {
        self.name = name
        self.title = title
        self.explanation = explanation
    }
}

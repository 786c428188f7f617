import ArgumentParser
import Glibc
import LarderConfig
import LarderIO
import LarderServer

/// `larder client`: how each client tool is set up for this proxy, printed, or written as
/// drop-in files (`--apply`) that `--undo` takes back.
struct Client: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set up client tools (apt, pip, npm, git, Docker...) for this proxy.",
        usage: "larder client [<options>]",
        discussion: helpProse + """


            Examples:
              larder client
              larder client --proxy http://192.168.1.5:3128 --tool apt --tool pip
              sudo larder client --apply --tool apt
              sudo larder client --undo
            """)

    /// The help's paragraphs, laid out at 76 columns here so that the tool list can grow.
    private static var helpProse: String {
        let about =
            "Prints the proxy and, with tls.intercept, the trust setup of each tool. Trust is only added: apt trusts "
            + "Larder's CA per intercepted host, tools that take one CA file get \(ClientSetup.bundleFile) (the system's "
            + "certificates plus Larder's CA, rebuilt with the system store). --apply writes drop-in files, or a whole file "
            + "only where none exists (/etc/gitconfig, pip.conf); it never edits or replaces a file it did not write, and "
            + "records what it wrote in \(ClientFiles.manifestPath) for --undo."
        let tools = "Tools: \(ClientSetup.toolNames.joined(separator: ", "))."
        return [about, tools].map { ClientTool.wrapped($0, width: 76).joined(separator: "\n") }.joined(separator: "\n\n")
    }

    @OptionGroup var location: CA.Location
    @Option(help: "The proxy URL clients use (default: the configuration's first proxy.listen address).")
    var proxy: String?
    @Option(name: .customLong("tool"), help: "Only this tool (repeatable).")
    var tools: [String] = []
    @Option(help: "The CA store's family: debian or rhel (default: what the root holds).")
    var os: String?
    @Flag(help: "Write the selected tools' files (default: every tool installed on this machine).")
    var apply = false
    @Flag(help: "Remove what --apply wrote.")
    var undo = false
    @Option(help: "Write under this directory instead of / (for tests and image builds).")
    var root: String?

    func validate() throws {
        if apply && undo { throw ValidationError("give --apply or --undo, not both") }
        for name in tools where !ClientSetup.toolNames.contains(name) {
            let hint = Suggestions.closest(to: name, in: ClientSetup.toolNames).map { " (did you mean '\($0)'?)" } ?? ""
            throw ValidationError("unknown tool '\(name)'\(hint); tools: \(ClientSetup.toolNames.joined(separator: ", "))")
        }
        if let os, ClientPlatform.Family(rawValue: os) == nil { throw ValidationError("--os is debian or rhel, not '\(os)'") }
        if let proxy, ClientSetup.checkedProxyURL(proxy) == nil {
            throw ValidationError("--proxy '\(proxy)' is not http://HOST:PORT (user:password@ allowed; no path, quote or space)")
        }
    }

    func run() throws {
        let rootDirectory = try resolvedRoot()
        if undo { return try runUndo(root: rootDirectory) }
        let (config, directory) = try location.load()
        let proxyURL = try chooseProxy(config)
        var authority: ClientSetup.Authority?
        if !config.tls.intercept.isEmpty {
            do {
                authority = try ClientSetup.Authority.load(caDirectory: directory, hosts: config.tls.intercept)
            } catch {
                printError(
                    "larder client: tls.intercept is set but the CA cannot be used: \(error); --dir names the service's CA directory (/var/lib/larder/larder-ca under systemd)"
                )
                throw ExitCode(1)
            }
        }
        if config.tls.intercept.isEmpty, location.dir != nil {
            // A CA named but no host to intercept: most likely the wrong --config.
            print(
                "Note: tls.intercept in \(location.configPath ?? "the embedded defaults") lists no host: HTTPS is tunnelled, "
                    + "not cached, so no tool is set up to trust Larder's CA and --dir is not used (is --config the "
                    + "service's file?)")
        }
        let files = try Self.openFiles(root: rootDirectory)
        let platform =
            os.flatMap(ClientPlatform.Family.init(rawValue:)).map(ClientPlatform.of)
            ?? ClientPlatform.detect(exists: files.exists) ?? .debian
        let setup = ClientSetup(proxyURL: proxyURL, authority: authority, platform: platform)
        if !config.proxy.authUsers.isEmpty || !config.proxy.authUsersFile.isEmpty {
            print("Note: proxy authentication is on: pass --proxy http://USER:PASSWORD@HOST:PORT so each tool sends it.")
        }
        if apply { return try runApply(setup, files: files) }
        print("Proxy: \(proxyURL)")
        for note in setup.notes { print("Note: " + note) }
        for tool in (tools.isEmpty ? setup.tools : tools.compactMap(setup.tool(named:))) {
            print("\n" + tool.text())
        }
        if tools.contains(where: { setup.tool(named: $0) == nil }) {
            print("\n(ca-bundle and system-store need tls.intercept and a CA: without them HTTPS is tunnelled, not cached.)")
        }
        print("\nlarder client --apply [--tool NAME] writes the files marked \"written by --apply\"; --undo removes them.")
    }

    /// `--proxy`, else the first listener; a wildcard listener cannot be dialled by clients.
    private func chooseProxy(_ config: Config) throws -> String {
        if let proxy { return ClientSetup.checkedProxyURL(proxy)! }
        guard let (url, isWildcard) = ClientSetup.proxyURL(listeningOn: config.proxy.listen) else {
            throw ValidationError("the configuration has no proxy.listen address: pass --proxy http://HOST:PORT")
        }
        if isWildcard {
            let port = config.proxy.listen[0].port
            if apply {
                throw ValidationError(
                    "proxy.listen is \(config.proxy.listen[0]) (every address), which clients cannot use: pass --proxy http://<this machine's LAN address>:\(port)"
                )
            }
            printError(
                "warning: proxy.listen is \(config.proxy.listen[0]) (every address): replace it below with this machine's LAN address, or pass --proxy http://ADDRESS:\(port)"
            )
        }
        return url
    }

    private func resolvedRoot() throws -> String {
        guard let root, root != "/" else { return "/" }
        // Absolute and without "." or "..": every path shown and written is the root's then.
        let path = StateDirectory.absolute(root)
        guard FileSystem.isDirectory(path) else { throw ValidationError("--root \(root) is not a directory") }
        return path
    }
}

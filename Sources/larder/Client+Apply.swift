import ArgumentParser
import Glibc
import LarderIO
import LarderServer

/// `larder client --apply` and `--undo`.
extension Client {
    /// Which tools to apply without `--tool`: those whose program (or configuration directory)
    /// is on this machine; the shell environment always.
    /// A program in /usr/local/bin counts as installed: pip there is the rule in `python:*`
    /// images, as are hand-installed go, git or docker.
    static let installedBy: [String: [String]] = [
        "apt": ["/usr/bin/apt-get", "/etc/apt"],
        "pip": ["/usr/bin/pip3", "/usr/bin/pip", "/usr/bin/uv", "/usr/local/bin/pip3", "/usr/local/bin/pip", "/usr/local/bin/uv"],
        "npm": ["/usr/bin/npm", "/usr/local/bin/npm"], "cargo": ["/usr/bin/cargo", "/usr/local/bin/cargo"],
        "go": ["/usr/bin/go", "/usr/local/go/bin/go", "/usr/local/bin/go"], "git": ["/usr/bin/git", "/usr/local/bin/git"],
        "curl": ["/usr/bin/curl", "/usr/local/bin/curl"], "docker": ["/usr/bin/dockerd", "/usr/local/bin/dockerd"],
        "containerd": ["/usr/bin/containerd", "/usr/local/bin/containerd"],
    ]

    func runApply(_ setup: ClientSetup, files: ClientFiles) throws {
        var files = files
        let chosen =
            tools.isEmpty
            ? ClientSetup.toolNames.filter { name in Client.installedBy[name].map { $0.contains(where: files.exists) } ?? true }
            : tools
        if tools.isEmpty {
            // Said, not silently left out: a tool installed elsewhere is one --tool away.
            for name in ClientSetup.toolNames where !chosen.contains(name) {
                let places = Client.installedBy[name, default: []].map(files.real).joined(separator: ", ")
                print("skipped \(name): not found (looked for \(places)); --tool \(name) writes its setup anyway")
            }
        }
        // Each tool with the tools its files refer to (the bundle), in the generator's order.
        var names = Set<String>()
        var pending = chosen
        while let name = pending.popLast() {
            guard names.insert(name).inserted, let tool = setup.tool(named: name) else { continue }
            pending += tool.requires
        }
        var selected = ClientSetup.toolNames.filter(names.contains).compactMap(setup.tool(named:))
        let foreign = selected.flatMap { tool in
            tool.files.filter { $0.isApplied && files.exists($0.path) && !files.owns($0.path) }.map { (tool.name, $0.path) }
        }
        if !foreign.isEmpty {
            let required = Set(selected.flatMap(\.requires))
            if !tools.isEmpty || foreign.contains(where: { required.contains($0.0) }) {
                for (tool, path) in foreign {
                    printError("larder client: \(files.real(path)) exists and was not written by larder client; \(tool) is left alone")
                }
                printError("larder client: nothing written. Move those files away, or leave their tools out (--tool), and run again.")
                throw ExitCode(65)
            }
            for (tool, path) in foreign {
                print(
                    "skipped \(tool): \(files.real(path)) exists and is not larder client's (larder client --tool \(tool) shows the setup)")
            }
            selected.removeAll { tool in foreign.contains { $0.0 == tool.name } }
        }
        // Every file's bytes, the bundle's too, before the first is written: a run that cannot
        // make one (no system store) then leaves nothing behind.
        let applied = selected.flatMap { $0.files.filter(\.isApplied) }
        var texts: [String: [UInt8]] = [:]
        for file in applied {
            if case .text(let text) = file.content { texts[file.path] = Array(text.utf8) }
        }
        var contents = texts
        for file in applied {
            if case .concatenation(let parts) = file.content { contents[file.path] = try concatenate(parts, planned: texts, files: files) }
        }
        var commands: [String] = []
        for tool in selected {
            for file in tool.files where file.isApplied {
                let bytes = contents[file.path] ?? []
                do {
                    try files.write(bytes, to: file.path, mode: file.mode)
                } catch {
                    try? files.saveManifest()
                    printError("larder client: cannot write \(files.real(file.path)): \(error)")
                    throw ExitCode(1)
                }
                if let command = file.afterRemoval { files.runAfterUndo(command) }
                print("wrote \(files.real(file.path))")
            }
            commands += tool.commands.filter { !commands.contains($0) }
        }
        do {
            try files.saveManifest()
        } catch {
            printError("larder client: cannot write \(files.real(ClientFiles.manifestPath)): \(error)")
            throw ExitCode(1)
        }
        if !commands.isEmpty {
            print(Client.nowRun(root: files.root))
            for command in commands { print("  " + command) }
        }
        let environment = Environment.variables
        let home = files.root == "/" ? environment["HOME"] : nil
        for line in Client.overrides(of: Set(selected.map(\.name)), setup: setup, environment: environment, home: home, files: files) {
            print("note: " + line)
        }
        print("Open a new shell for the /etc/profile.d variables. larder client --undo removes what was written.")
    }

    /// What would win over the files just written, as this shell and machine have it now: a
    /// tool's own variables in the environment, and pip configuration files read after the
    /// site-wide one (pip's order: site-wide, then user, then the virtualenv's and PIP_*).
    /// A CA variable naming another file makes the tool refuse Larder's certificate, and after
    /// `tls.splice_after_failures` refusals the host is tunnelled blind for that client.
    static func overrides(
        of tools: Set<String>, setup: ClientSetup, environment: [String: String], home: String?, files: ClientFiles
    ) -> [String] {
        guard tools.contains("pip") else { return [] }
        var lines: [String] = []
        if let value = environment["PIP_PROXY"], !value.isEmpty, value != setup.proxyURL {
            lines.append("PIP_PROXY=\(value) in this environment wins over the pip.conf just written: unset it")
        }
        if setup.authority != nil {
            for name in ["PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"] {
                guard let value = environment[name], !value.isEmpty, value != ClientSetup.bundleFile else { continue }
                lines.append(
                    "\(name)=\(value) in this environment wins over pip's cert: pip refuses Larder's certificate, and after a few refusals Larder tunnels the host blind for this client (larder tls lists it; larder tls clear HOST ends it). Unset it, or point it at \(ClientSetup.bundleFile)"
                )
            }
        }
        var readAfter = ["/etc/pip.conf"].filter(files.exists).map(files.real)
        if let home, !home.isEmpty {
            readAfter += ["\(home)/.config/pip/pip.conf", "\(home)/.pip/pip.conf"].filter { access($0, F_OK) == 0 }
        }
        for path in readAfter {
            guard let text = try? FileSystem.readWhole(path, limit: 1 << 20) else { continue }
            let keys = String(decoding: text, as: UTF8.self).split(separator: "\n").compactMap { line in
                line.split(separator: "=", maxSplits: 1).first.map { $0.filter { $0 != " " && $0 != "\t" } }
            }
            if keys.contains("proxy") || keys.contains("cert") {
                lines.append("\(path) sets pip's proxy or cert and is read after the pip.conf just written: its values win")
            }
        }
        return lines
    }

    /// The parts of a combined bundle, one after the other, each ending in a new line: a part
    /// this run writes (Larder's CA) as it will be written, another read from the root. A
    /// missing system store is an error: a bundle of Larder's CA alone would replace, not add.
    private func concatenate(_ parts: [String], planned: [String: [UInt8]], files: ClientFiles) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for part in parts {
            do {
                bytes += try planned[part] ?? FileSystem.readWhole(files.real(part), limit: 64 << 20)
            } catch {
                printError(
                    "larder client: cannot read \(files.real(part)) (\(error)): the bundle needs the system's certificates (install ca-certificates, or pass --os)"
                )
                throw ExitCode(1)
            }
            if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
        }
        return bytes
    }

    /// The heading of the commands left to run: under `--root`, they belong to the system
    /// there (an image being built), not to this machine.
    static func nowRun(root: String) -> String {
        root == "/" ? "Now run:" : "Now run, in the system under \(root) (chroot \(root), or the image's build):"
    }

    /// The files under `root` with the manifest read, or exit 1 saying why it could not be.
    static func openFiles(root: String) throws -> ClientFiles {
        do {
            return try ClientFiles(root: root)
        } catch {
            printError(
                "larder client: cannot read \(root == "/" ? "" : root)\(ClientFiles.manifestPath): "
                    + Text.printable(String(describing: error)))
            throw ExitCode(1)
        }
    }

    func runUndo(root: String) throws {
        var files = try Self.openFiles(root: root)
        guard files.exists(ClientFiles.manifestPath) else {
            print("Nothing to undo: \(files.real(ClientFiles.manifestPath)) does not exist.")
            return
        }
        let (commands, notes) = (files.afterUndo, files.earlierNotes)
        let (removed, changed): ([String], [String])
        do {
            (removed, changed) = try files.removeAll()
        } catch {
            printError("larder client --undo: \(Text.printable(String(describing: error)))")
            throw ExitCode(1)
        }
        // The manifest is text anyone with root over the tree may have edited (an image's
        // author, for --root): none of it reaches the terminal as control characters.
        for path in removed { print("removed \(Text.printable(files.real(path)))") }
        for path in changed { print("kept \(Text.printable(files.real(path))): changed since larder client wrote it") }
        if !commands.isEmpty {
            print(Client.nowRun(root: files.root))
            for command in commands { print("  " + Text.printable(command)) }
        }
        if !notes.isEmpty {
            print("Also, as recorded by an earlier larder client (the files named are removed above unless kept):")
            for note in notes { print("  " + Text.printable(note)) }
        }
    }
}

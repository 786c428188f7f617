import ArgumentParser
import Glibc
import LarderIO
import LarderServer

/// `larder client --apply` and `--undo`.
extension Client {
    /// Which tools to apply without `--tool`: those whose program (or configuration directory)
    /// is on this machine; the shell environment always.
    static let installedBy: [String: [String]] = [
        "apt": ["/usr/bin/apt-get", "/etc/apt"], "pip": ["/usr/bin/pip3", "/usr/bin/pip", "/usr/bin/uv"],
        "npm": ["/usr/bin/npm", "/usr/local/bin/npm"], "cargo": ["/usr/bin/cargo"], "go": ["/usr/bin/go", "/usr/local/go/bin/go"],
        "git": ["/usr/bin/git"], "curl": ["/usr/bin/curl"], "docker": ["/usr/bin/dockerd"], "containerd": ["/usr/bin/containerd"],
    ]

    func runApply(_ setup: ClientSetup, files: ClientFiles) throws {
        var files = files
        let chosen =
            tools.isEmpty
            ? ClientSetup.toolNames.filter { name in Client.installedBy[name].map { $0.contains(where: files.exists) } ?? true }
            : tools
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
                if file.undo != "rm \(file.path)" { files.noteForUndo(file.path + ": " + file.undo) }
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
            print("Now run:")
            for command in commands { print("  " + command) }
        }
        print("Open a new shell for the /etc/profile.d variables. larder client --undo removes what was written.")
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

    /// The files under `root` with the manifest read, or exit 1 saying why it could not be.
    static func openFiles(root: String) throws -> ClientFiles {
        do {
            return try ClientFiles(root: root)
        } catch {
            printError("larder client: cannot read \(root == "/" ? "" : root)\(ClientFiles.manifestPath): \(error)")
            throw ExitCode(1)
        }
    }

    func runUndo(root: String) throws {
        var files = try Self.openFiles(root: root)
        guard files.exists(ClientFiles.manifestPath) else {
            print("Nothing to undo: \(files.real(ClientFiles.manifestPath)) does not exist.")
            return
        }
        let notes = files.afterUndo
        let (removed, changed): ([String], [String])
        do {
            (removed, changed) = try files.removeAll()
        } catch {
            printError("larder client --undo: \(error)")
            throw ExitCode(1)
        }
        for path in removed { print("removed \(files.real(path))") }
        for path in changed { print("kept \(files.real(path)): changed since larder client wrote it") }
        if !notes.isEmpty {
            print("Also:")
            for note in notes { print("  " + note) }
        }
    }
}

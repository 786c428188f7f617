import Foundation
import Testing

extension IntegrationTests {
    /// What the command line tells an operator: config mistakes at their own place, with the
    /// table they concern and the fix; `warm` telling fetched from already cached; help that
    /// fits a terminal of 80 columns.
    @Suite(.timeLimit(.minutes(2))) struct Messages {
        static func larder(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
            let child = try ChildProcess(Paths.larder, arguments, environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
            child.waitUntilExit()
            return child
        }

        /// `check-config` on a file holding `bytes`: its exit status and stderr.
        static func checkConfig(_ bytes: [UInt8]) throws -> (status: Int32, stdout: String, stderr: String, path: String) {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/larder.toml"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let check = try larder(["check-config", path])
            return (check.terminationStatus, check.stdout, check.stderr, path)
        }

        static func checkConfig(_ text: String) throws -> (status: Int32, stdout: String, stderr: String, path: String) {
            try checkConfig(Array(text.utf8))
        }

        @Test func checkConfigNamesEachMistakeAtItsOwnPlace() throws {
            let cases: [(text: String, error: String)] = [
                ("[proxy]\npresets = [\"debian\"]\n", ":2:1: unknown key 'presets' in [proxy] ('presets' belongs in [cache])"),
                (
                    "[proxy]\nworkers = 2\n[log]\nlevel = \"info\"\n[proxy]\nmax_connections = 5\nidle_timeout = \"5s\"\n",
                    ":5:1: duplicate table [proxy] (first defined at line 1); a table is defined once: move these keys under the first [proxy]"
                ),
                ("[proxy]\nworkers = 0\n", ":2:11: 'workers' must be at least 1, got 0; write \"auto\" for one event loop per usable CPU"),
                (
                    "[disk]\nmax_bytes = \"1GiB\"\nmax_object_bytes = \"2GiB\"\n",
                    ":3:20: disk.max_object_bytes \"2GiB\" is larger than the whole disk tier (disk.max_bytes 1GiB); "
                        + "set it to at most \"1GiB\" or raise disk.max_bytes"
                ),
                (
                    "[memory]\nmax_bytes = \"8MiB\"\nmax_object_bytes = \"16MiB\"\n",
                    ":3:20: memory.max_object_bytes \"16MiB\" is larger than the whole memory tier (memory.max_bytes 8MiB); "
                        + "set it to at most \"8MiB\" or raise memory.max_bytes"
                ),
                ("[disk]\nmax_bytes = \"0B\"\n", ":2:13: 'max_bytes' must be between 1MiB and "),
            ]
            for (text, error) in cases {
                let check = try Self.checkConfig(text)
                #expect(check.status == 1, "\(text): \(check.stdout)")
                let lines = check.stderr.split(separator: "\n").map(String.init)
                #expect(lines.first?.hasPrefix(check.path + error) == true, "\(text)\n\(check.stderr)")
                #expect(lines.last == check.path + ": 1 error", "one mistake, one error:\n\(check.stderr)")
            }
        }

        /// A file that cannot be read has no line to point at: its path and why, nothing else.
        @Test func aFileThatCannotBeReadIsNamedWithoutAnExcerpt() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            for (path, reason) in [(directory + "/missing.toml", "No such file or directory"), (directory, "Is a directory")] {
                let check = try Self.larder(["check-config", path])
                #expect(check.terminationStatus == 1)
                #expect(check.stderr == "\(path): cannot read: \(reason)\n\(path): 1 error\n", "\(check.stderr)")
                let serve = try Self.larder(["serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
                #expect(serve.terminationStatus == 1)
                #expect(serve.stderr.contains("\(path): cannot read: \(reason)") && !serve.stderr.contains("^"), "\(serve.stderr)")
                // The admin commands read it for the admin address and token: the same words, exit 1
                // and no usage banner (review 124).
                let stats = try Self.larder(["stats", "--config", path])
                #expect(stats.terminationStatus == 1, "\(stats.stderr)")
                #expect(stats.stderr == "\(path): cannot read: \(reason)\n\(path): 1 error\n", "\(stats.stderr)")
            }
            // An empty name, as an unset variable gives it (review 125).
            for command in [["check-config", ""], ["stats", "--config", ""], ["serve", "--config", ""]] {
                let empty = try Self.larder(command)
                #expect(
                    empty.terminationStatus == 1 && empty.stderr.hasPrefix("\"\": the configuration file's name is empty\n"),
                    "\(command): \(empty.stderr)")
            }
        }

        @Test func aByteOrderMarkIsAcceptedAndNotShownUnderTheCaret() throws {
            let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
            let good = try Self.checkConfig(bom + Array("[proxy]\nmax_connections = 5\n".utf8))
            #expect(good.status == 0, "\(good.stderr)")
            #expect(good.stdout.hasPrefix(good.path + ": OK: "), "\(good.stdout)")
            let bad = try Self.checkConfig(bom + Array("[proxx]\n".utf8))
            #expect(bad.status == 1)
            #expect(
                bad.stderr == "\(bad.path):1:1: unknown section [proxx] (did you mean 'proxy'?)\n  [proxx]\n  ^\n\(bad.path): 1 error\n",
                "\(bad.stderr.debugDescription)")
        }

        /// Run twice over the same URLs: the first run fetches them all, the second finds them
        /// all cached and fetches nothing, and says so in counts and bytes.
        @Test func warmTellsFetchedFromAlreadyCached() throws {
            let origin = try Origin()
            let larder = try Larder()
            let urls = [1000, 2000, 3000].map { origin.url("/warm\($0)?size=\($0)&cc=max-age=600") }
            func warm() throws -> ChildProcess {
                let child = try Self.larder(["warm", "--proxy", "127.0.0.1:\(larder.proxyPort)"] + urls)
                #expect(child.terminationStatus == 0, "\(child.stdout)\(child.stderr)")
                return child
            }
            let first = try warm()
            #expect(first.stdout == "3 URLs: 3 fetched (3 stored, 0 not cacheable; 5.9 KiB), 0 already cached (0 B), 0 failed\n")
            let second = try warm()
            #expect(second.stdout == "3 URLs: 0 fetched (0 stored, 0 not cacheable; 0 B), 3 already cached (5.9 KiB), 0 failed\n")
            #expect(second.stderr.split(separator: "\n").allSatisfy { $0.hasSuffix(": already cached") }, "\(second.stderr)")
            #expect(try origin.total() == 3, "the second run reached no origin")
        }

        /// Every help screen, found by walking the SUBCOMMANDS lists: at 80 columns no line is
        /// longer, and the prose (overview, discussion, usage) reads exactly as on a wide
        /// terminal, so no authored line was broken in the middle.
        @Test func everyHelpFitsEightyColumns() throws {
            var queue: [[String]] = [[]]
            var seen = 0
            while let command = queue.first, seen < 50 {
                queue.removeFirst()
                seen += 1
                let narrow = try Self.larder(command + ["--help"], environment: ["COLUMNS": "80"])
                let wide = try Self.larder(command + ["--help"], environment: ["COLUMNS": "400"])
                #expect(narrow.terminationStatus == 0, "\(command)")
                let name = (["larder"] + command).joined(separator: " ")
                for line in narrow.stdout.split(separator: "\n") where line.count > 80 {
                    Issue.record("\(name) --help: \(line.count) columns: \(line)")
                }
                // Up to the first section of options, arguments or subcommands ("OPTIONS:").
                func prose(_ text: String) -> String {
                    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                    let isSection = { (line: Substring) in line.hasSuffix(":") && line.dropLast().allSatisfy { $0.isUppercase } }
                    return lines.prefix { !isSection($0) }.joined(separator: "\n")
                }
                #expect(prose(narrow.stdout) == prose(wide.stdout), "\(name) --help wraps its prose at 80 columns")
                #expect(prose(narrow.stdout).contains("USAGE: "), "\(name): the prose runs to the usage")
                // Subcommands: "  name   abstract", or "  name (default)   abstract".
                let lines = narrow.stdout.split(separator: "\n", omittingEmptySubsequences: false)
                if let start = lines.firstIndex(of: "SUBCOMMANDS:") {
                    for line in lines[(start + 1)...].prefix(while: { !$0.isEmpty }) where line.hasPrefix("  ") && !line.hasPrefix("   ") {
                        queue.append(command + [String(line.dropFirst(2).prefix { $0 != " " })])
                    }
                }
            }
            #expect(seen >= 14, "larder, its subcommands and theirs: \(seen)")
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// The command line itself: what a mistyped command gets.
    @Suite(.timeLimit(.minutes(1))) struct CommandLine {
        static func run(_ arguments: [String]) throws -> ChildProcess {
            let child = try ChildProcess(Paths.larder, arguments, environment: ["PATH": "/usr/bin:/bin"])
            child.waitUntilExit()
            return child
        }

        @Test func aMistypedSubcommandGetsTheNearestName() throws {
            let stat = try Self.run(["stat"])
            #expect(stat.terminationStatus == 64)
            #expect(stat.stderr.contains("unknown command 'stat'. Did you mean 'stats'?"), "\(stat.stderr)")
            #expect(!stat.stderr.contains("USAGE"), "not serve's usage")
            let far = try Self.run(["frobnicate"])
            #expect(far.terminationStatus == 64 && far.stderr.contains("Commands: serve, check-config"), "\(far.stderr)")
            // Options still go to the default subcommand, and real names still work.
            #expect(try Self.run(["--version"]).terminationStatus == 0)
            #expect(try Self.run(["check-config", "--help"]).terminationStatus == 0)
        }
        /// The manual page names every command the binary has and every option of the two an
        /// operator types most (serve, check-config): a new command or option updates it.
        @Test func theManualPageNamesEveryCommandAndTheDaemonsOptions() throws {
            let page = try String(contentsOfFile: Paths.root + "/packaging/larder.1", encoding: .utf8)
            let far = try Self.run(["frobnicate"])
            let list = try #require(far.stderr.components(separatedBy: "Commands: ").last, "\(far.stderr)")
            let commands = list.trimmingCharacters(in: .whitespacesAndNewlines).dropLast().components(separatedBy: ", ")
            #expect(commands.count > 8, "\(far.stderr)")
            // Each is an entry of COMMANDS: a tagged paragraph (.TP) whose tag (`.B warm \-\-file`,
            // `.BI "check-config " file`) starts with its name.
            let entries = page.components(separatedBy: ".TP\n").dropFirst().map { entry in
                String(entry.prefix { $0 != "\n" }.drop { $0 != " " }.drop { $0 == " " || $0 == "\"" }.prefix { $0 != " " && $0 != "\"" })
            }
            for command in commands { #expect(entries.contains(command), "larder.1 has no entry for \(command): \(entries)") }
            for command in ["serve", "check-config"] {
                let help = try Self.run([command, "--help"]).stdout
                let options = Set(help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," }).filter { $0.hasPrefix("--") })
                for option in options where !["--help", "--version"].contains(option) {
                    let spelled = option.replacingOccurrences(of: "-", with: "\\-")
                    #expect(page.contains(spelled), "larder.1 does not name \(command)'s \(option)")
                }
            }
        }
    }
}

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
    }
}

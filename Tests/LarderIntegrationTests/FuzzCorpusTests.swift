import Foundation
import Testing

/// Replays the committed fuzz corpus (seeds and every input that once crashed a target)
/// through the normal debug build of `larder-fuzz`, so a regression shows up in `swift test`
/// even where libFuzzer is not run.
@Suite(.timeLimit(.minutes(3))) struct FuzzCorpusTests {
    static let targets = ["request-parser", "response-parser", "chunked", "cache-control", "config", "disk-entry"]

    @Test(arguments: targets)
    func corpusReplaysWithoutFailure(target: String) throws {
        let directory = Paths.root + "/Fuzz/corpus/" + target
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted().map { directory + "/" + $0 }
        #expect(files.count >= 3, "the corpus for \(target) has seeds")
        let child = try ChildProcess(Paths.fuzzer, files, environment: ["FUZZ_TARGET": target])
        child.waitUntilExit()
        #expect(child.terminationStatus == 0, "\(target): \(child.stderr)")
        #expect(child.stdout.contains("\(target): \(files.count) inputs replayed"))
    }

    @Test func unknownTargetIsRefused() throws {
        let child = try ChildProcess(Paths.fuzzer, [], environment: ["FUZZ_TARGET": "nope"])
        child.waitUntilExit()
        #expect(child.terminationStatus == 2)
        #expect(child.stderr.contains("request-parser, response-parser, chunked, cache-control, config, disk-entry"))
    }
}

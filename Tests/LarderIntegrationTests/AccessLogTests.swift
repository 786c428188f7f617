import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// The access log as operators live with it: a file that logrotate moves and SIGUSR1
    /// reopens, without the dashboard's polls, with malformed requests, users and agents.
    @Suite(.timeLimit(.minutes(2))) struct AccessLogFile {
        static func lines(_ path: String) -> [String] {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        @Test func aRotatedFileLosesNoLineAcrossSigusr1() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/access.log"
            let origin = try Origin()
            let larder = try Larder(config: "[log]\naccess_file = \"\(file)\"\n")
            let connection = try RawConnection(port: larder.proxyPort)
            func fetch(_ index: Int) throws {
                connection.send("GET \(origin.url("/rot/\(index)?cc=max-age=60")) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try connection.readResponse().status == 200)
            }
            for index in 0..<20 { try fetch(index) }
            // logrotate: move the file away, then the postrotate signal.
            try FileManager.default.moveItem(atPath: file, toPath: file + ".1")
            larder.child.signal(SIGUSR1)
            try larder.child.waitForOutput { $0.contains("reopened the access log") }
            for index in 20..<50 { try fetch(index) }
            var old: [String] = []
            var new: [String] = []
            _ = waitUntil(seconds: 5) {
                old = Self.lines(file + ".1")
                new = Self.lines(file)
                return old.count + new.count >= 50
            }
            let seen = (old + new).compactMap { line in line.split(separator: "/rot/").last?.split(separator: "?").first.map(String.init) }
            #expect(Set(seen) == Set((0..<50).map(String.init)), "every request once: \(old.count) + \(new.count) lines")
            #expect(old.count + new.count == 50)
            #expect(new.count >= 30, "lines after the reopen go to the new file")
            #expect(!larder.child.stdout.contains("/rot/"), "nothing on stdout")
        }

        @Test func adminPollsStayOutMalformedRequestsGetALineUsersAndAgentsAreNamed() throws {
            let origin = try Origin()
            let alice = try hashPassword(user: "alice", password: "correct horse")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(alice)\"]\n")
            for _ in 0..<3 { _ = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/healthz"]) }
            let proxied = try Curl.viaProxy(
                larder.proxy, ["--proxy-user", "alice:correct horse", "-A", "Test \"Agent\"/1.0", origin.url("/logged?cc=max-age=60")])
            #expect(proxied.status == 200)
            let garbage = try RawConnection(port: larder.proxyPort)
            garbage.send("NOT A REQUEST\r\n\r\n")
            #expect(try garbage.readResponse().status == 400)
            var text = ""
            _ = waitUntil(seconds: 5) {
                text = larder.child.stdout
                return text.contains("/logged") && text.contains("\"- -\" 400")
            }
            let line = text.split(separator: "\n").first { $0.contains("/logged") }.map(String.init) ?? ""
            #expect(line.contains(" user=\"alice\""), "\(line)")
            #expect(line.contains(" ua=\"Test 'Agent'/1.0\""), "quotes in client text cannot end the field: \(line)")
            #expect(text.contains("\"- -\" 400 error"), "the malformed request's line: \(text)")
            #expect(!text.contains("/healthz"), "admin polls are not logged by default")

            let verbose = try Larder(config: "[log]\nadmin_requests = true\n")
            _ = try Curl.run(["http://127.0.0.1:\(verbose.adminPort)/healthz"])
            #expect(waitUntil(seconds: 5) { verbose.child.stdout.contains("/healthz") }, "log.admin_requests = true logs them")
        }
    }
}

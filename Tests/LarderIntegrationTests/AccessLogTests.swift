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

        /// The shipped logrotate snippet, run by logrotate itself while requests keep coming:
        /// its postrotate SIGUSR1 makes Larder reopen the file, and every line is in one of the two.
        @Test func logrotateWithTheShippedSnippetLosesNoLine() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/access.log"
            let origin = try Origin()
            let larder = try Larder(config: "[log]\naccess_file = \"\(file)\"\n")
            // The snippet as installed, pointed at this test's folder and daemon.
            let shipped = try String(contentsOfFile: Paths.root + "/packaging/logrotate", encoding: .utf8)
            let snippet = shipped.replacingOccurrences(of: "/var/log/larder/*.log", with: directory + "/*.log")
                .split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.contains("systemctl kill") ? "        kill -USR1 \(larder.child.processIdentifier)" : String($0) }
                .joined(separator: "\n")
            #expect(snippet.contains(directory) && snippet.contains("kill -USR1"), "the snippet's path or postrotate moved")
            try snippet.write(toFile: directory + "/logrotate.conf", atomically: true, encoding: .utf8)

            let connection = try RawConnection(port: larder.proxyPort)
            func fetch(_ index: Int) throws {
                connection.send("GET \(origin.url("/rot/\(index)?cc=max-age=60")) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try connection.readResponse().status == 200)
            }
            for index in 0..<40 { try fetch(index) }
            _ = waitUntil(seconds: 5) { Self.lines(file).count >= 40 }
            let logrotate = try ChildProcess(
                "/usr/sbin/logrotate", ["--force", "--state", directory + "/logrotate.state", directory + "/logrotate.conf"],
                environment: ["PATH": "/usr/sbin:/usr/bin:/bin"])
            // Requests go on while logrotate moves the file and signals.
            for index in 40..<200 { try fetch(index) }
            #expect(logrotate.terminationStatus == 0, "\(logrotate.stderr)")
            try larder.child.waitForOutput { $0.contains("reopened the access log") }
            for index in 200..<230 { try fetch(index) }

            var old: [String] = []
            var new: [String] = []
            _ = waitUntil(seconds: 5) {
                old = Self.lines(file + ".1")
                new = Self.lines(file)
                return old.count + new.count >= 230
            }
            let seen = (old + new).compactMap { line in line.split(separator: "/rot/").last?.split(separator: "?").first.map(String.init) }
            #expect(Set(seen) == Set((0..<230).map(String.init)), "every request once: \(old.count) + \(new.count) lines")
            #expect(old.count + new.count == 230)
            #expect(old.count >= 40, "the rotated file keeps what was written before")
            #expect(new.count >= 30, "lines after the reopen go to the new file")
            #expect(!larder.child.stdout.contains("/rot/"), "nothing on stdout")
        }

        /// Serves `count` requests (misses, then hits of the same URLs, and 404s) with the log in
        /// `format` to a file; returns the file's lines once all are written.
        /// The log file is written in `directory` (the caller's, removed by it).
        static func logged(format: String, misses: Int, hits: Int, notFound: Int, in directory: String) throws -> (
            lines: [String], file: String
        ) {
            let file = directory + "/access.log"
            let origin = try Origin()
            let larder = try Larder(config: "[log]\naccess_file = \"\(file)\"\naccess_format = \"\(format)\"\n")
            let connection = try RawConnection(port: larder.proxyPort)
            for index in 0..<(misses + hits + notFound) {
                let path =
                    index < misses + hits
                    ? "/fmt/\(index % misses)?cc=max-age=600&size=2000" : "/fmt/missing\(index)?status=404"
                connection.send("GET \(origin.url(path)) HTTP/1.1\r\nHost: x\r\nUser-Agent: Tools \"Test\"/1\r\n\r\n")
                _ = try connection.readResponse()
            }
            var lines: [String] = []
            _ = waitUntil(seconds: 5) {
                lines = Self.lines(file)
                return lines.count >= misses + hits + notFound
            }
            return (lines, file)
        }

        /// calamaris and GoAccess read the squid format and count what was served.
        @Test func squidFormatIsReadByCalamarisAndGoAccess() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (lines, file) = try Self.logged(format: "squid", misses: 6, hits: 6, notFound: 3, in: directory)
            #expect(lines.count == 15, "\(lines)")
            let calamaris = try ChildProcess("/bin/sh", ["-c", "calamaris -a < \"$0\"", file], environment: ["PATH": "/usr/bin:/bin"])
            calamaris.waitUntilExit()
            let report = calamaris.stdout
            func figure(_ label: String) -> Int? {
                report.split(separator: "\n").first { $0.hasPrefix(label) }.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) }
            }
            #expect(figure("lines parsed:") == 15, "\(report)")
            #expect(figure("invalid lines:") == 0)
            #expect(figure("Total amount cached:") == 6, "the six hits")
            // GoAccess's SQUID preset expects syslog-prefixed lines; the native format spelled out:
            let json = file + ".json"
            let goaccess = try ChildProcess(
                "/usr/bin/goaccess",
                [file, "--log-format=%x.%^ %~%L %h %^/%s %b %m %U", "--date-format=%s", "--time-format=%s", "-o", json],
                environment: ["PATH": "/usr/bin:/bin"])
            goaccess.waitUntilExit()
            let general =
                (try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any])?["general"]
                as? [String: Any]
            #expect(general?["total_requests"] as? Int == 15, "\(goaccess.stderr)")
            #expect(general?["failed_requests"] as? Int == 0)
        }

        @Test func combinedFormatIsReadByGoAccessAndJSONLinesParse() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (combined, file) = try Self.logged(format: "combined", misses: 4, hits: 4, notFound: 2, in: directory)
            #expect(combined.count == 10)
            #expect(combined.first?.contains("\"Tools 'Test'/1\"") == true, "\(combined.first ?? "")")
            let json = file + ".json"
            let goaccess = try ChildProcess(
                "/usr/bin/goaccess", [file, "--log-format=COMBINED", "-o", json], environment: ["PATH": "/usr/bin:/bin"])
            goaccess.waitUntilExit()
            let general =
                (try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any])?["general"]
                as? [String: Any]
            #expect(general?["total_requests"] as? Int == 10, "\(goaccess.stderr)")
            #expect(general?["failed_requests"] as? Int == 0)

            let jsonDirectory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: jsonDirectory) }
            let (objects, _) = try Self.logged(format: "json", misses: 2, hits: 2, notFound: 1, in: jsonDirectory)
            let parsed = try objects.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(parsed.count == 5)
            #expect(parsed.compactMap { $0?["outcome"] as? String }.filter { $0 == "hit" }.count == 2)
            #expect(parsed.first??["user_agent"] as? String == "Tools \"Test\"/1", "JSON keeps the quotes, escaped")
        }

        @Test func anAccessFileThatCannotBeOpenedStopsTheStartNamingIt() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/no-such-directory/access.log"
            try "[log]\naccess_file = \"\(file)\"\n".write(toFile: directory + "/larder.toml", atomically: true, encoding: .utf8)
            let child = try ChildProcess(
                Paths.larder,
                [
                    "serve", "--config", directory + "/larder.toml", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                    "--cache-dir", directory + "/cache",
                ], environment: ["PATH": "/usr/bin:/bin"])
            child.waitUntilExit()
            #expect(child.terminationStatus == 1)
            #expect(child.stderr.contains("open \(file) (log.access_file)"), "\(child.stderr)")
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

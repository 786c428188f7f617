import Foundation
import Testing

extension Origin {
    /// Installs a scripted resource at `target`.
    func script(_ target: String, _ responses: [Scripted], conditional: Bool) throws {
        let body = try JSONSerialization.data(withJSONObject: ["responses": responses.map(\.json), "conditional": conditional])
        let directory = Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body.write(to: URL(fileURLWithPath: directory + "/script.json"))
        // The target may have a query of its own: encoded, so its & and = stay in it.
        let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "/-._~"))) ?? target
        let result = try Curl.run(direct + ["--data-binary", "@\(directory)/script.json", url("/_script?target=\(encoded)")])
        guard result.status == 200 else { throw TestFailure("cannot script \(target): \(result.status)") }
    }
}

extension IntegrationTests {
    /// The RFC 9111 conformance suite: each case scripts an origin resource, sends requests
    /// through a fresh Larder, and checks what the client saw and what reached the origin.
    @Suite(.timeLimit(.minutes(3))) struct Conformance {
        static let cases: [ConformanceCase] =
            StoringCases.all + VaryCases.all + FreshnessCases.all + RequestDirectiveCases.all + ValidationCases.all
            + RangeCases.all + InvalidationCases.all + StaleCases.all + PolicyCases.all + StatusCases.all

        @Test func catalogueHasAtLeast150Cases() {
            #expect(Self.cases.count >= 150, "\(Self.cases.count) cases")
        }

        @Test(arguments: cases)
        func conforms(_ testCase: ConformanceCase) throws {
            let origin = try Origin()
            let larder = try Larder(config: testCase.config)
            let base = "/conformance"
            try origin.script(base, testCase.script, conditional: testCase.conditional)
            for (suffix, script) in testCase.others {
                try origin.script(base + suffix, script, conditional: testCase.conditional)
            }
            for (index, step) in testCase.steps.enumerated() {
                if step.wait > 0 { usleep(UInt32(step.wait * 1_000_000)) }
                let label = "\(testCase.testDescription) step \(index + 1)"
                let path = base + (step.path ?? "")
                let connection = try RawConnection(port: larder.proxyPort)
                var request = "\(step.method) \(origin.url(path)) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n"
                for (name, value) in step.headers { request += "\(name): \(Self.expand(value))\r\n" }
                if ["POST", "PUT", "PATCH"].contains(step.method) { request += "Content-Length: 0\r\n" }
                connection.send(request + "\r\n")
                let response = try connection.readResponse(headRequest: step.method == "HEAD")
                let expect = step.expect
                let status = CacheStatusField(response.headers.last { $0.0 == "cache-status" }?.1)
                #expect(response.status == expect.status, "\(label): status")
                if let hit = expect.hit { #expect(status?.hit == hit, "\(label): hit (Cache-Status: \(status?.raw ?? "none"))") }
                if let fwd = expect.fwd { #expect(status?.fwd == fwd, "\(label): fwd (Cache-Status: \(status?.raw ?? "none"))") }
                if let fwdStatus = expect.fwdStatus {
                    #expect(status?.fwdStatus == fwdStatus, "\(label): fwd-status (Cache-Status: \(status?.raw ?? "none"))")
                }
                if let stored = expect.stored { #expect(status?.stored == stored, "\(label): stored (\(status?.raw ?? "none"))") }
                if let detail = expect.detail { #expect(status?.detail == detail, "\(label): detail (\(status?.raw ?? "none"))") }
                if let body = expect.body { #expect(response.text == body, "\(label): body") }
                for (name, value) in expect.headers {
                    #expect(response.header(name) == value, "\(label): \(name)")
                }
                if let origins = expect.origin { #expect(try origin.count(path) == origins, "\(label): origin requests") }
                if let least = expect.originAtLeast { #expect(try origin.count(path) >= least, "\(label): origin requests") }
                if !expect.sent.isEmpty {
                    let seen = try origin.requests().last { $0.target == path }
                    for (name, value) in expect.sent {
                        let actual = seen?.headers.first { $0.0.lowercased() == name.lowercased() }?.1
                        if let value, value.hasSuffix("*") {
                            #expect(
                                actual?.hasPrefix(String(value.dropLast())) == true,
                                "\(label): \(name) sent to the origin: \(actual ?? "none")")
                        } else {
                            #expect(actual == value, "\(label): \(name) sent to the origin")
                        }
                    }
                }
                if let check = expect.check, let problem = check(response) {
                    Issue.record("\(label): \(problem)")
                }
            }
        }

        /// `{now}` in a request header becomes the current HTTP date.
        static func expand(_ value: String) -> String {
            guard value.contains("{now}") else { return value }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            return value.replacingOccurrences(of: "{now}", with: formatter.string(from: Date()))
        }
    }
}

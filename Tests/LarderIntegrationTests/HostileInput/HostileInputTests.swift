import Foundation
import Testing

extension IntegrationTests {
    /// The hostile-input corpus against the real binary: every case gets exactly its status,
    /// the connection closes where the framing cannot be trusted, and the origin's request
    /// counter proves that nothing invalid was forwarded. Valid cases are followed by a
    /// second request on the same connection, which must be answered normally (the proxy
    /// and the client still agree where each request ends).
    @Suite(.timeLimit(.minutes(3))) struct HostileInput {
        @Test func corpusHasAtLeastSixtyCases() {
            #expect(HostileCorpus.cases.count >= 60)
            #expect(Set(HostileCorpus.cases.map(\.name)).count == HostileCorpus.cases.count, "case names are unique")
        }

        @Test func everyCaseIsAnsweredAsTheRFCSays() throws {
            let origin = try Origin()
            let larder = try Larder()
            for (index, hostile) in HostileCorpus.cases.enumerated() {
                let path = "/hostile/\(index)"
                let request = substitute(hostile.request, url: origin.url(path), origin: origin, larder: larder)
                let before = try origin.total()
                let connection = try RawConnection(port: larder.proxyPort)
                connection.send(request)
                let response: RawConnection.Response
                do {
                    response = try connection.readResponse()
                } catch {
                    Issue.record("\(hostile.name): no response (\(error))")
                    continue
                }
                #expect(response.status == hostile.status, "\(hostile.name): \(response.text)")
                if hostile.closes {
                    #expect(connection.peerClosed(), "\(hostile.name): the connection must close")
                } else {
                    // The same connection still carries a well-formed request.
                    connection.send("GET \(origin.url(path + "/next")) HTTP/1.1\r\nHost: x\r\n\r\n")
                    let next = try? connection.readResponse()
                    #expect(next?.status == 200, "\(hostile.name): the connection must stay usable")
                }
                let forwarded = try origin.total() - before - (hostile.closes ? 0 : 1)
                #expect(forwarded == (hostile.forwarded ? 1 : 0), "\(hostile.name): \(forwarded) requests reached the origin")
            }
            #expect(larder.child.isRunning, "the daemon survives the corpus")
        }

        /// Replaces the placeholders byte-wise, so cases with non-UTF-8 bytes work too.
        private func substitute(_ request: [UInt8], url: String, origin: Origin, larder: Larder) -> [UInt8] {
            let replacements: [([UInt8], [UInt8])] = [
                (Array("%URL".utf8), Array(url.utf8)),
                (Array("%AUTH".utf8), Array("127.0.0.1:\(origin.port)".utf8)),
                (Array("%SELF".utf8), Array("127.0.0.1:\(larder.proxyPort)".utf8)),
                (Array("%ADMINPORT".utf8), Array("\(larder.adminPort)".utf8)),
                (Array("%PORT".utf8), Array("\(origin.port)".utf8)),
            ]
            var output: [UInt8] = []
            var index = 0
            outer: while index < request.count {
                for (placeholder, value) in replacements
                where request.count - index >= placeholder.count && Array(request[index..<(index + placeholder.count)]) == placeholder {
                    output += value
                    index += placeholder.count
                    continue outer
                }
                output.append(request[index])
                index += 1
            }
            return output
        }
    }
}

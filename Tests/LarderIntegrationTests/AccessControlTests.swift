import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Who may use the proxy and for what: the client ACL (IPv4 and IPv6), proxy
    /// authentication, loop and self-target protection, and Host rewriting.
    @Suite(.timeLimit(.minutes(3))) struct AccessControl {
        @Test func ipv6ClientsAreCheckedAgainstTheAllowList() throws {
            let origin = try Origin()
            let refused = try Larder(config: "[proxy]\nallow = [\"127.0.0.0/8\"]\n", listen: ["[::1]:0"])
            let denied = try Curl.viaProxy("http://[::1]:\(refused.proxyPort)", [origin.url("/v6")])
            #expect(denied.status == 403)
            #expect(denied.text.contains("::1"))
            #expect(try origin.total() == 0, "nothing forwarded for a refused client")

            let allowed = try Larder(config: "[proxy]\nallow = [\"::1/128\"]\n", listen: ["[::1]:0"])
            #expect(try Curl.viaProxy("http://[::1]:\(allowed.proxyPort)", [origin.url("/v6")]).status == 200)
            #expect(try origin.count("/v6") == 1)
        }

        @Test func proxyAuthenticationChallengesChecksAndNeverForwardsCredentials() throws {
            let origin = try Origin()
            let alice = try hashPassword(user: "alice", password: "correct horse")
            let bob = try hashPassword(user: "bob", password: "battery staple")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(alice)\", \"\(bob)\"]\nauth_realm = \"CI cache\"\n")
            let url = origin.url("/private?cc=max-age=60")

            let missing = try Curl.viaProxy(larder.proxy, [url])
            #expect(missing.status == 407)
            #expect(missing.header("proxy-authenticate") == "Basic realm=\"CI cache\", charset=\"UTF-8\"")
            for credentials in ["alice:wrong", "mallory:correct horse", "alice:", "bob:correct horse"] {
                #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", credentials, url]).status == 407, "\(credentials)")
            }
            let malformed = try Curl.viaProxy(larder.proxy, ["-H", "Proxy-Authorization: Basic !!!", url])
            #expect(malformed.status == 407)
            #expect(try origin.total() == 0, "nothing reaches the origin without valid credentials")

            let first = try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:correct horse", url])
            #expect(first.status == 200)
            // Remembered verdicts answer the same credentials again, and bob's work too.
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "alice:correct horse", url]).cacheStatus?.hit == true)
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "bob:battery staple", url]).status == 200)
            // Proxy-Authorization is hop-by-hop: the origin never sees it.
            let seen = try origin.requests()
            #expect(seen.count == 1)
            #expect(!seen.contains { $0.headers.contains { $0.0.lowercased() == "proxy-authorization" } })

            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metricValue(metrics, "larder_proxy_auth_failures_total") == 6)
            #expect(larder.child.stderr.contains("proxy authentication failed"))
        }

        /// Review 117 F1: a client sending wrong passwords (no account needed) filled the one
        /// queue of checks every client shares, and a user whose verdict was not remembered got
        /// 503. The flood holds its own address's share; the user's check goes in turn.
        @Test func aFloodOfWrongPasswordsFromOneClientLocksNoUserOut() throws {
            let origin = try Origin()
            let bob = try hashPassword(user: "bob", password: "battery staple")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(bob)\"]\nmax_connections = 2000\n")
            let url = origin.url("/after-flood")
            var flood: [RawConnection] = []
            for index in 0..<300 {
                let connection = try RawConnection(port: larder.proxyPort, from: "127.0.0.2", receiveTimeout: 60)
                let credentials = Data("bob:wrong \(index)".utf8).base64EncodedString()
                connection.send("GET \(url) HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic \(credentials)\r\n\r\n")
                flood.append(connection)
            }
            usleep(300_000)  // the flood parsed and queued, or refused
            let answer = try Curl.viaProxy(larder.proxy, ["--proxy-user", "bob:battery staple", "--max-time", "60", url])
            #expect(answer.status == 200, "a user is not refused for another client's flood: \(answer.status)")
            // The user's check went in turn: of the flood's, only those its client's turns took
            // were hashed before it, its share at most (first come, first served, all 300 were).
            var answered = [Int?](repeating: nil, count: flood.count)
            var checkedBefore = 0
            for (index, connection) in flood.enumerated() where connection.hasInput(within: 0) {
                let status = try connection.readResponse().status
                answered[index] = status
                if status == 407 { checkedBefore += 1 }
            }
            #expect(checkedBefore <= 2 * 16, "\(checkedBefore) of the flood's checks went before the user's")
            for index in flood.indices where answered[index] == nil { answered[index] = try flood[index].readResponse().status }
            let statuses = answered.compactMap { $0 }
            #expect(statuses.filter { $0 == 503 }.count >= 300 - 2 * 16, "past its share, the flood is refused")
            #expect(statuses.allSatisfy { $0 == 503 || $0 == 407 })
            // One line a second at most about it, not one a request.
            let lines = larder.child.stderr.components(separatedBy: "\n")
            #expect(lines.filter { $0.contains("proxy authentication") }.count < 20, "\(lines.count) lines")
        }

        @Test func reloadChangesPasswordsAtOnce() throws {
            let origin = try Origin()
            let old = try hashPassword(user: "dana", password: "old secret")
            let new = try hashPassword(user: "dana", password: "new secret")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(old)\"]\n")
            let url = origin.url("/r")
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "dana:old secret", url]).status == 200)
            try larder.reload("[proxy]\nauth_users = [\"\(new)\"]\n")
            // The remembered verdict for the old password no longer counts.
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "dana:old secret", url]).status == 407)
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "dana:new secret", url]).status == 200)
        }

        /// A GET of `url` with `credentials` ("user:password") in Basic Proxy-Authorization.
        static func get(_ url: String, as credentials: String) -> String {
            "GET \(url) HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic \(Data(credentials.utf8).base64EncodedString())\r\n\r\n"
        }

        /// sha512crypt of "slow" at 16,000,000 rounds: a check of this user holds the hashing
        /// thread for a few seconds (3.2 on an AMD EPYC).
        static let slowUser =
            "slow:$6$rounds=16000000$larderslow$wtd6smQYA/lOAf3PI3JyJxfFIgfJj8nPyQ6Eju7s/q.p.skkJpsAsalV3F.9UCyng07aHdlFzn4A3uOvCnsZI/"

        /// Review 120 F3: a check waiting while a reload changed its user's password was decided
        /// against the old hash, and the request went through with the old password. It is
        /// checked again under the users the reload set.
        @Test func aReloadWhileACheckWaitsDecidesItUnderTheNewPassword() throws {
            let origin = try Origin()
            let old = try hashPassword(user: "erin", password: "old secret")
            let new = try hashPassword(user: "erin", password: "new secret")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(old)\", \"\(Self.slowUser)\"]\n")
            let url = origin.url("/while-waiting")
            func request(_ credentials: String) -> String { Self.get(url, as: credentials) }
            // Another client's check of the slow user holds the thread; erin's waits behind it.
            let busy = try RawConnection(port: larder.proxyPort, from: "127.0.0.2", receiveTimeout: 60)
            busy.send(request("slow:wrong"))
            usleep(300_000)
            let erin = try RawConnection(port: larder.proxyPort, receiveTimeout: 60)
            erin.send(request("erin:old secret"))
            usleep(100_000)
            try larder.reload("[proxy]\nauth_users = [\"\(new)\", \"\(Self.slowUser)\"]\n")
            #expect(!busy.hasInput(within: 0), "the reload came while the checks waited")
            #expect(try erin.readResponse().status == 407, "the password the reload replaced is refused")
            #expect(try busy.readResponse().status == 407)
            #expect(try origin.count("/while-waiting") == 0)
            #expect(try Curl.viaProxy(larder.proxy, ["--proxy-user", "erin:new secret", url]).status == 200)
        }

        /// Review 121 F2: wrong user names were remembered against the first user's hash, wrong
        /// passwords against their own user's, so after a reload that changed only the first
        /// user's hash an unknown name's second try was hashed again and a known one's was not:
        /// its time told which names exist. A reload that changes the users forgets every
        /// wrong verdict. (A check answered from the table does not wait for the hashing
        /// thread, which another client's check of the slow user holds here.)
        @Test func aReloadLeavesNoTimeThatTellsWhichNamesExist() throws {
            let origin = try Origin()
            let erin = try hashPassword(user: "erin", password: "e")
            let frank = try hashPassword(user: "frank", password: "f")
            let larder = try Larder(config: "[proxy]\nauth_users = [\"\(erin)\", \"\(frank)\", \"\(Self.slowUser)\"]\n")
            let url = origin.url("/names")
            func send(_ credentials: String, from address: String = "127.0.0.1") throws -> RawConnection {
                let connection = try RawConnection(port: larder.proxyPort, from: address, receiveTimeout: 60)
                connection.send(Self.get(url, as: credentials))
                return connection
            }
            /// Whether each of `probes` is answered within 0.4 s while the thread is held.
            func answeredAtOnce(_ probes: [String], holding: String) throws -> [Bool] {
                let busy = try send(holding, from: "127.0.0.2")
                usleep(200_000)
                let sent = try probes.map { try send($0) }
                usleep(400_000)
                let answers = try sent.map { probe in
                    guard probe.hasInput(within: 0) else { return false }
                    return try probe.readResponse().status == 407
                }
                #expect(try busy.readResponse().status == 407)
                return answers
            }
            for credentials in ["bob:wrong", "frank:wrong"] { #expect(try send(credentials).readResponse().status == 407) }
            #expect(try answeredAtOnce(["bob:wrong", "frank:wrong"], holding: "slow:first") == [true, true], "both remembered")
            let renewed = try hashPassword(user: "erin", password: "e2")
            try larder.reload("[proxy]\nauth_users = [\"\(renewed)\", \"\(frank)\", \"\(Self.slowUser)\"]\n")
            #expect(try answeredAtOnce(["bob:wrong", "frank:wrong"], holding: "slow:second") == [false, false], "both hashed again")
            #expect(try origin.count("/names") == 0)
        }

        /// Review 120 F6: a tunnel's bytes carry no credentials, so a reload that changed its
        /// user's password left it open for as long as its client liked. The reload closes the
        /// tunnels of users it changed or removed (`tunnel-revoked`); others stay.
        @Test func aReloadClosesTheTunnelsOfAUserItChanged() throws {
            let target = try TunnelTarget(.raw)
            let erin = try hashPassword(user: "erin", password: "old secret")
            let frank = try hashPassword(user: "frank", password: "kept")
            let larder = try Larder(config: "[proxy]\nconnect_ports = [\(target.port)]\nauth_users = [\"\(erin)\", \"\(frank)\"]\n")
            var tunnels: [RawConnection] = []
            for credentials in ["erin:old secret", "frank:kept"] {
                let tunnel = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
                tunnel.send(
                    "CONNECT 127.0.0.1:\(target.port) HTTP/1.1\r\nHost: 127.0.0.1:\(target.port)\r\n"
                        + "Proxy-Authorization: Basic \(Data(credentials.utf8).base64EncodedString())\r\n\r\n")
                #expect(try tunnel.readResponse(headRequest: true).status == 200)
                tunnel.send("HOLD\n")
                tunnels.append(tunnel)
            }
            let renewed = try hashPassword(user: "erin", password: "new secret")
            try larder.reload("[proxy]\nconnect_ports = [\(target.port)]\nauth_users = [\"\(renewed)\", \"\(frank)\"]\n")
            #expect(tunnels[0].peerClosed(), "erin's tunnel closed with her old password")
            _ = try larder.child.waitForOutput(stream: \.stdout) { $0.contains("tunnel-revoked") }
            #expect(!tunnels[1].hasInput(within: 300), "frank's tunnel stays open")
            #expect(try larder.stats().connections.active == 1)
        }

        /// Review 122 F1: the user a connection's earlier request was let in as stayed on it, so
        /// a CONNECT sent on it while authentication was off took that name, and the reload
        /// turning authentication on again (the user unchanged) left the tunnel open.
        @Test func aTunnelLetInWithoutAuthenticationClosesWhenItTurnsOn() throws {
            let origin = try Origin()
            let target = try TunnelTarget(.raw)
            let alice = try hashPassword(user: "alice", password: "a")
            let on = "[proxy]\nconnect_ports = [\(target.port)]\nauth_users = [\"\(alice)\"]\n"
            let larder = try Larder(config: on)
            let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
            connection.send(Self.get(origin.url("/before"), as: "alice:a"))
            #expect(try connection.readResponse().status == 200)
            try larder.reload("[proxy]\nconnect_ports = [\(target.port)]\n")
            connection.send("CONNECT 127.0.0.1:\(target.port) HTTP/1.1\r\nHost: 127.0.0.1:\(target.port)\r\n\r\n")
            #expect(try connection.readResponse(headRequest: true).status == 200)
            connection.send("HOLD\n")
            try larder.reload(on)
            #expect(connection.peerClosed(), "the tunnel let in without credentials closed")
        }

        /// The requests of an intercepted session carry no credentials either: a reload that
        /// removes the user closes the session, and the client's next request finds it gone.
        @Test func aReloadClosesTheInterceptedSessionsOfAUserItRemoved() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try setup.origin()
            let erin = try hashPassword(user: "erin", password: "old secret")
            let frank = try hashPassword(user: "frank", password: "kept")
            let larder = try Larder(config: setup.config(ports: [origin.port], proxy: "auth_users = [\"\(erin)\", \"\(frank)\"]"))
            let go = Paths.temporaryDirectory() + "-go"
            defer { try? FileManager.default.removeItem(atPath: go) }
            // One keep-alive session: a request, then a wait for `go`, then another.
            let script = """
                import base64, http.client, os, ssl, sys, time
                context = ssl.create_default_context(cafile=sys.argv[1])
                session = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[2]), context=context, timeout=10)
                session.set_tunnel("localhost", int(sys.argv[3]),
                    headers={"Proxy-Authorization": "Basic " + base64.b64encode(b"erin:old secret").decode()})
                session.request("GET", "/first")
                answer = session.getresponse(); answer.read()
                print("first", answer.status, flush=True)
                for _ in range(200):
                    if os.path.exists(sys.argv[4]): break
                    time.sleep(0.05)
                try:
                    session.request("GET", "/second")
                    answer = session.getresponse(); answer.read()
                    print("second", answer.status, flush=True)
                except (OSError, http.client.HTTPException) as error:
                    print("second closed", type(error).__name__, flush=True)
                """
            let client = try ChildProcess(
                "/usr/bin/env", ["python3", "-c", script, setup.larderCA, "\(larder.proxyPort)", "\(origin.port)", go])
            defer { if client.isRunning { kill(client.pid, SIGKILL) } }
            _ = try client.waitForOutput(stream: \.stdout) { $0.contains("first") }
            #expect(client.stdout.contains("first 200"), "\(client.stdout) \(client.stderr)")
            try larder.reload(setup.config(ports: [origin.port], proxy: "auth_users = [\"\(frank)\"]"))
            _ = FileManager.default.createFile(atPath: go, contents: Data())
            client.waitUntilExit()
            #expect(client.stdout.contains("second closed"), "\(client.stdout) \(client.stderr)")
            #expect(try origin.count("/second") == 0)
        }

        @Test func plainPasswordsInTheConfigAreRefusedWithTheirPosition() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/larder.toml"
            try "[proxy]\nauth_users = [\"erin:hunter2\"]\n".write(toFile: path, atomically: true, encoding: .utf8)
            let check = try ChildProcess(Paths.larder, ["check-config", path])
            check.waitUntilExit()
            #expect(check.terminationStatus == 1)
            #expect(check.stderr.contains("\(path):2:15:"), "\(check.stderr)")
            #expect(check.stderr.contains("larder hash-password erin"))
        }

        @Test func absoluteFormAuthorityWinsOverHost() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/host-check?cc=max-age=60")
            let poisoned = try Curl.viaProxy(larder.proxy, ["-H", "Host: evil.example", url])
            #expect(poisoned.status == 200)
            let seen = try origin.requests()
            #expect(seen.first?.headers.first { $0.0.lowercased() == "host" }?.1 == "127.0.0.1:\(origin.port)")
            // RFC 9112 §3.2: Host first on the wire (Larder lists it last; curl moves it up).
            #expect(seen.first?.headers.first?.0.lowercased() == "host")
            // The entry is stored under the URL's authority: a request with yet another Host is a hit
            // for the same URL, and a request for evil.example's URL is not.
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "Host: other.example", url]).cacheStatus?.hit == true)
            #expect(try origin.total() == 1)
        }

        @Test func requestsThatAlreadyPassedThroughThisProxyGet508() throws {
            let origin = try Origin()
            let larder = try Larder()
            _ = try Curl.viaProxy(larder.proxy, [origin.url("/learn-via")])
            let via = try #require(try origin.requests().first?.headers.first { $0.0.lowercased() == "via" }?.1)
            let looped = try Curl.viaProxy(larder.proxy, ["-H", "Via: 1.1 upstream-cache, \(via)", origin.url("/looped")])
            #expect(looped.status == 508)
            #expect(try origin.count("/looped") == 0)
            // Another proxy's Via is not a loop.
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "Via: 1.1 other-cache", origin.url("/not-looped")]).status == 200)
        }
    }
}

import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// CONNECT tunnels against real servers: curl through a TLS tunnel, raw sockets for
    /// half-close, backpressure and timeouts.
    @Suite(.timeLimit(.minutes(3))) struct Tunnels {
        /// A config allowing CONNECT to `ports`.
        static func config(ports: [Int], extra: String = "") -> String {
            "[proxy]\nconnect_ports = [\(ports.map(String.init).joined(separator: ", "))]\n\(extra)"
        }

        /// Opens a tunnel by hand: sends CONNECT (and `early` bytes in the same write) and reads the answer head.
        static func connect(_ larder: Larder, to port: Int, early: String = "") throws -> (RawConnection, RawConnection.Response) {
            let connection = try RawConnection(port: larder.proxyPort, receiveTimeout: 10)
            connection.send("CONNECT 127.0.0.1:\(port) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n\(early)")
            return (connection, try connection.readResponse(headRequest: true))
        }

        @Test func tunnelsFiftyMebibytesOfTLSIntactBothWays() throws {
            let target = try TunnelTarget(.tls)
            let larder = try Larder(config: Self.config(ports: [target.port]))
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let size = 50 * 1024 * 1024
            let download = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-sS", "--max-time", "120", "--proxytunnel", "--proxy", larder.proxy, "--cacert", target.certificate,
                    "-D", directory + "/headers", "-o", directory + "/body", "https://127.0.0.1:\(target.port)/bytes?size=\(size)",
                ])
            download.waitUntilExit()
            #expect(download.terminationStatus == 0, "\(download.stderr)")
            let headers = try String(contentsOfFile: directory + "/headers", encoding: .utf8)
            #expect(headers.contains("HTTP/1.1 200 Connection established"), "curl saw the tunnel greeting")
            let expected = headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-content-sha256:") }
                .map { $0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces) }
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/body")
            #expect((attributes[.size] as? Int) == size)
            #expect(try sha256(of: directory + "/body") == expected, "the 50 MiB arrived intact")

            // And the other way: 50 MiB uploaded through the tunnel, digested by the server.
            let upload = directory + "/upload"
            #expect(FileManager.default.createFile(atPath: upload, contents: nil))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: upload))
            var block = Data(count: 1 << 20)
            for index in 0..<50 {
                block[0] = UInt8(index)
                block[1 << 19] = UInt8(255 - index)
                handle.write(block)
            }
            try handle.close()
            let post = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-sS", "--max-time", "120", "--proxytunnel", "--proxy", larder.proxy, "--cacert", target.certificate,
                    "--data-binary", "@" + upload, "-o", directory + "/digest", "https://127.0.0.1:\(target.port)/digest",
                ])
            post.waitUntilExit()
            #expect(post.terminationStatus == 0, "\(post.stderr)")
            #expect(try String(contentsOfFile: directory + "/digest", encoding: .utf8) == sha256(of: upload))

            // Counted in the metrics, never cached, logged as a tunnel.
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            let down = metricValue(metrics, "larder_tunnel_bytes_total{direction=\"server_to_client\"}")
            let up = metricValue(metrics, "larder_tunnel_bytes_total{direction=\"client_to_server\"}")
            #expect(down > Double(size) && up > Double(size))
            #expect(metricValue(metrics, "larder_tunnels_total") == 2)
            #expect(larder.cacheFiles("v1").isEmpty && larder.cacheFiles("tmp").isEmpty, "a tunnel never caches")
            _ = try larder.child.waitForOutput(stream: \.stdout) { $0.contains("\"CONNECT 127.0.0.1:\(target.port)\" 200 tunnel ") }
        }

        @Test func clientBytesSentWithTheConnectHeadAreRelayed() throws {
            let target = try TunnelTarget(.raw)
            let larder = try Larder(config: Self.config(ports: [target.port]))
            // The command and its data travel in the same write as the CONNECT head.
            let (connection, response) = try Self.connect(larder, to: target.port, early: "ECHO\nhello tunnel")
            #expect(response.status == 200)
            connection.shutdownWrite()
            // The server answers only after it sees end of stream: the half-close went through,
            // and the other direction stayed open for its answer.
            let line = connection.readLine()
            #expect(line?.hasPrefix("RECEIVED 12 ") == true, "\(line ?? "nothing")")
            #expect(connection.peerClosed())
        }

        @Test func halfCloseFromTheClientKeepsTheServerDirectionOpen() throws {
            let target = try TunnelTarget(.raw)
            let larder = try Larder(config: Self.config(ports: [target.port]))
            let (connection, response) = try Self.connect(larder, to: target.port)
            #expect(response.status == 200)
            let payload = [UInt8](repeating: 0x61, count: 3 * 1024 * 1024)
            connection.send("ECHO\n")
            connection.send(payload)
            connection.shutdownWrite()
            let line = connection.readLine()
            #expect(line?.hasPrefix("RECEIVED \(payload.count) ") == true, "\(line ?? "nothing")")
            #expect(connection.peerClosed(), "the tunnel closes once both directions ended")
            #expect(try waitUntil { try larder.activeConnections() == 0 }, "nothing left open")
        }

        @Test func aClientThatStopsReadingDoesNotMakeTheDaemonBuffer() throws {
            let target = try TunnelTarget(.raw)
            let larder = try Larder(config: Self.config(ports: [target.port]))
            let size = 256 * 1024 * 1024
            let before = larder.child.residentKiB()
            let (connection, response) = try Self.connect(larder, to: target.port)
            #expect(response.status == 200)
            connection.send("SEND \(size)\n")
            // Read nothing for two seconds while the server pushes as fast as it can.
            usleep(2_000_000)
            let stalled = larder.child.residentKiB()
            let received = connection.countUntilClose()
            #expect(received == size, "every byte arrives once the client reads")
            // Two 64 KiB buffers per tunnel; allow for allocator noise, far below the 256 MiB pushed.
            print("tunnel backpressure: RSS before \(before) KiB, while stalled \(stalled) KiB")
            #expect(stalled - before < 16 * 1024, "RSS grew by \(stalled - before) KiB while the client read nothing")
        }

        @Test func portsOutsideConnectPortsGet403AndNoConnection() throws {
            let target = try TunnelTarget(.raw)
            let larder = try Larder()  // connect_ports defaults to [443]
            let (connection, response) = try Self.connect(larder, to: target.port)
            #expect(response.status == 403)
            #expect(connection.peerClosed())
            #expect(try target.connectionCount() == 0)
        }

        @Test func unreachableTargetGets502() throws {
            let closedPort = try freePort()
            let larder = try Larder(config: Self.config(ports: [closedPort]))
            let (connection, response) = try Self.connect(larder, to: closedPort)
            #expect(response.status == 502)
            #expect(connection.peerClosed())
        }

        @Test func targetThatNeverAnswersGets504AtTheConnectTimeout() throws {
            let target = try TunnelTarget(.blackhole)
            let larder = try Larder(config: Self.config(ports: [target.port]) + "[upstream]\nconnect_timeout = \"1s\"\n")
            let (connection, response) = try Self.connect(larder, to: target.port)
            #expect(response.status == 504)
            #expect(connection.peerClosed())
        }

        @Test func idleTunnelIsClosedAtTunnelIdleTimeout() throws {
            let target = try TunnelTarget(.raw)
            let larder = try Larder(config: Self.config(ports: [target.port], extra: "tunnel_idle_timeout = \"1s\"\n"))
            let (connection, response) = try Self.connect(larder, to: target.port)
            #expect(response.status == 200)
            connection.send("HOLD\n")
            // Nothing moves either way; the receive timeout (10 s) bounds the wait.
            #expect(connection.peerClosed(), "the idle tunnel was closed")
            _ = try larder.child.waitForOutput(stream: \.stdout) { $0.contains("tunnel-idle") }
        }

        @Test func tunnelToTheProxyItselfIsRefused() throws {
            let larder = try Larder()
            // Allow the proxy's own port, then aim at it by address and by name.
            try larder.reload(Self.config(ports: [443, larder.proxyPort, larder.adminPort]))
            for host in ["127.0.0.1", "localhost"] {
                for port in [larder.proxyPort, larder.adminPort] {
                    let connection = try RawConnection(port: larder.proxyPort)
                    connection.send("CONNECT \(host):\(port) HTTP/1.1\r\nHost: \(host):\(port)\r\n\r\n")
                    let response = try connection.readResponse(headRequest: true)
                    #expect(response.status == 403, "CONNECT \(host):\(port)")
                }
            }
        }

        @Test func connectNeedsProxyCredentialsWhenAuthenticationIsOn() throws {
            let target = try TunnelTarget(.tls)
            let entry = try hashPassword(user: "carol", password: "tunnel pass")
            let larder = try Larder(config: Self.config(ports: [target.port], extra: "auth_users = [\"\(entry)\"]\n"))
            let url = "https://127.0.0.1:\(target.port)/bytes?size=1000"
            let refused = try Curl.run(["--proxytunnel", "--proxy", larder.proxy, "--cacert", target.certificate, url])
            #expect(refused.exitCode != 0, "curl fails the CONNECT")
            #expect(refused.stderr.contains("407"), "\(refused.stderr)")
            let allowed = try Curl.run([
                "--proxytunnel", "--proxy", larder.proxy, "--proxy-user", "carol:tunnel pass", "--cacert", target.certificate, url,
            ])
            #expect(allowed.status == 200 && allowed.body.count == 1000)
        }
    }
}

/// The hex SHA-256 of a file, by sha256sum.
func sha256(of path: String) throws -> String {
    let child = try ChildProcess("/usr/bin/sha256sum", [path])
    child.waitUntilExit()
    return String(child.stdout.prefix(64))
}

/// A value from Prometheus text, 0 when absent.
func metricValue(_ text: String, _ series: String) -> Double {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.split(separator: " ").last ?? "") ?? 0
    }
    return 0
}

/// A port nothing listens on (bound, then closed).
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            guard bind(fd, pointer, length) == 0 else { return -1 }
            return getsockname(fd, pointer, &length)
        }
    }
    guard bound == 0 else { throw TestFailure("cannot bind a port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// `larder hash-password USER` with the password on stdin: the `auth_users` entry.
func hashPassword(user: String, password: String) throws -> String {
    let child = try ChildProcess(
        "/bin/sh", ["-c", "printf '%s\\n' \"$PASSWORD\" | \"$LARDER\" hash-password \"$USER_NAME\""],
        environment: ["PASSWORD": password, "LARDER": Paths.larder, "USER_NAME": user, "PATH": "/usr/bin:/bin"])
    child.waitUntilExit()
    guard child.terminationStatus == 0 else { throw TestFailure("hash-password failed: \(child.stderr)") }
    return child.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Polls `condition` every 50 ms for up to `seconds`.
func waitUntil(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

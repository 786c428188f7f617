import Foundation
import Glibc
import LarderIO
import Testing

@testable import LarderTLS

/// The server side of an intercepted session over a real socket, with curl and openssl as
/// clients: the handshake, SNI and ALPN rules, and bytes both ways through the transport.
@Suite(.timeLimit(.minutes(1))) final class TLSTransportTests {
    let directory = NSTemporaryDirectory() + "larder-tls-" + UUID().uuidString
    let interceptor: TLSInterceptor

    init() throws {
        try LocalCA.create(in: directory, permitting: ["registry.example.org"], rotate: false)
        interceptor = try TLSInterceptor(mint: try CertificateMint(directory: directory, leafValidity: .seconds(86_400)))
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// A client process (its output and status) started against a listener, and the server
    /// side driven by `serve` on the accepted socket, which must finish within 10 s.
    private func exchange(
        client: (Int) -> [String], serve: (TLSTransport) throws -> Void, host: String = "registry.example.org"
    ) throws -> (status: Int32, out: String, transport: TLSTransport) {
        let listener = try Socket.listen(on: SocketAddress(parsing: "127.0.0.1:0")!)
        defer { listener.close() }
        let port = try #require(try listener.localAddress()?.port)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = client(Int(port))
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var accepted: Socket?
        for _ in 0..<1000 where accepted == nil {
            accepted = try listener.accept()?.0
            if accepted == nil { usleep(10_000) }
        }
        let socket = try #require(accepted, "the client connected")
        try socket.setNonBlocking()
        let transport = try TLSTransport(socket: socket, interceptor: interceptor, host: host)
        defer { transport.close() }
        try serve(transport)
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, out, transport)
    }

    /// Reads through `transport` a few bytes at a time until `end` arrives; notes whether
    /// decrypted bytes were ever left waiting in the session.
    private func readRequest(_ transport: TLSTransport, sawBuffered: inout Bool) throws -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 7)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n") {
            let count = try chunk.withUnsafeMutableBytes { buffer throws(SystemError) in try transport.read(into: buffer) }
            if let count, count > 0 {
                bytes += chunk[0..<count]
                if transport.hasBufferedInput { sawBuffered = true }
                continue
            }
            if count == 0 { break }
            var poll = pollfd(fd: transport.socket.fd, events: Int16(POLLIN), revents: 0)
            _ = Glibc.poll(&poll, 1, 100)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func writeAll(_ transport: TLSTransport, _ text: String) throws {
        var bytes = Array(text.utf8)
        let deadline = Date().addingTimeInterval(10)
        while !bytes.isEmpty, Date() < deadline {
            let written = try bytes.withUnsafeMutableBytes { raw throws(SystemError) -> Int? in
                var vector = iovec(iov_base: raw.baseAddress, iov_len: raw.count)
                return try withUnsafePointer(to: &vector) { pointer throws(SystemError) in
                    try transport.write(UnsafeBufferPointer(start: pointer, count: 1), more: false)
                }
            }
            if let written { bytes.removeFirst(written) } else { usleep(1000) }
        }
    }

    @Test func curlGetsAnAnswerThroughTheSessionForTheNameItAskedFor() throws {
        var sawBuffered = false
        var request = ""
        let result = try exchange(
            client: { port in
                [
                    "curl", "-sS", "--max-time", "10", "--cacert", "ca.pem", "--resolve", "registry.example.org:\(port):127.0.0.1",
                    "-w", "\n%{http_version}", "https://registry.example.org:\(port)/simple/",
                ]
            },
            serve: { transport in
                request = try readRequest(transport, sawBuffered: &sawBuffered)
                try writeAll(transport, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
                transport.shutdownWrite()
            })
        #expect(result.status == 0, "\(result.out)")
        #expect(result.out == "hello\n1.1", "\(result.out)")
        #expect(request.hasPrefix("GET /simple/ HTTP/1.1\r\n") && request.contains("Host: registry.example.org"), "\(request)")
        #expect(sawBuffered, "a request read 7 bytes at a time leaves decrypted bytes in the session")
        #expect(result.transport.serverName == "registry.example.org")
        #expect(result.transport.version.hasPrefix("TLSv1."))
        #expect(interceptor.mint.statistics.minted == 1)
    }

    @Test func aServerNameOtherThanTheConnectTargetIsRefused() throws {
        var thrown: (any Error)?
        let result = try exchange(
            client: { port in
                [
                    "curl", "-sS", "--max-time", "10", "--cacert", "ca.pem", "--resolve", "registry.example.org:\(port):127.0.0.1",
                    "https://registry.example.org:\(port)/",
                ]
            },
            serve: { transport in
                var ignored = false
                do { _ = try readRequest(transport, sawBuffered: &ignored) } catch { thrown = error }
            },
            host: "other.example.org")
        #expect(result.status != 0, "curl must not get through: \(result.out)")
        #expect(thrown != nil)
        #expect(
            result.transport.failure?.contains("asked for registry.example.org, not other.example.org") == true,
            "\(result.transport.failure ?? "")")
        #expect(result.transport.stage == .closed)
        #expect(interceptor.mint.statistics.minted == 0, "no certificate is shown for a refused name")
    }

    @Test func oldProtocolsAndOtherApplicationProtocolsAreRefused() throws {
        for (arguments, expected) in [
            (["-tls1_1"], "SSL_do_handshake"),
            (["-alpn", "h2"], "no application protocol"),
        ] {
            var thrown: (any Error)?
            let result = try exchange(
                client: { port in
                    ["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "registry.example.org", "-CAfile", "ca.pem"]
                        + arguments
                },
                serve: { transport in
                    var ignored = false
                    do { _ = try readRequest(transport, sawBuffered: &ignored) } catch { thrown = error }
                })
            #expect(thrown != nil, "\(arguments): \(result.out)")
            #expect(
                result.transport.failure?.lowercased().contains(expected.lowercased()) == true,
                "\(arguments): \(result.transport.failure ?? "")")
        }
    }
}

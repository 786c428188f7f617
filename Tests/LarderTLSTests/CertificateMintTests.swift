import Foundation
import LarderConfig
import Testing

@testable import LarderTLS

/// The leaf certificates Larder shows intercepted clients, checked by the openssl command line
/// against a real CA made by ``LocalCA`` in a temporary directory.
@Suite(.timeLimit(.minutes(1))) final class CertificateMintTests {
    let directory = NSTemporaryDirectory() + "larder-mint-" + UUID().uuidString

    init() throws {
        try LocalCA.create(in: directory, permitting: ["registry.example.org", "files.example.net"], rotate: false)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// `openssl ARGUMENTS` run in the CA directory: exit status and everything it printed.
    private func openssl(_ arguments: [String]) throws -> (status: Int32, out: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, out)
    }

    private func write(_ leaf: CertificateMint.Leaf, as name: String) throws -> String {
        try leaf.certificatePEM().write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        return name
    }

    @Test func aMintedLeafVerifiesAsAServerCertificateForItsName() throws {
        let mint = try CertificateMint(directory: directory, leafValidity: .seconds(7 * 86_400))
        let file = try write(try mint.leaf(for: "Registry.Example.Org", now: 0), as: "leaf.pem")
        let verified = try openssl([
            "verify", "-CAfile", "ca.pem", "-purpose", "sslserver", "-verify_hostname", "registry.example.org", file,
        ])
        #expect(verified.status == 0, "\(verified.out)")
        let wrongName = try openssl(["verify", "-CAfile", "ca.pem", "-verify_hostname", "other.example.org", file])
        #expect(wrongName.status != 0 && wrongName.out.contains("hostname mismatch"), "\(wrongName.out)")

        let text = try openssl(["x509", "-in", file, "-noout", "-text"]).out
        #expect(text.contains("DNS:registry.example.org"))
        #expect(text.contains("TLS Web Server Authentication"))
        #expect(text.contains("CA:FALSE"))
        let dates = try openssl(["x509", "-in", file, "-noout", "-checkend", String(7 * 86_400 - 60)])
        #expect(dates.status == 0, "valid for the configured week")
        #expect(try openssl(["x509", "-in", file, "-noout", "-checkend", String(7 * 86_400 + 60)]).status != 0, "and no longer")

        let under = try write(try mint.leaf(for: "a.b.files.example.net", now: 0), as: "under.pem")
        #expect(try openssl(["verify", "-CAfile", "ca.pem", "-verify_hostname", "a.b.files.example.net", under]).status == 0)
    }

    @Test func leavesAreCachedByNameAndMintedAgainAtHalfTheirValidity() throws {
        let day: UInt64 = 86_400 * 1_000_000_000
        let mint = try CertificateMint(directory: directory, leafValidity: .seconds(2 * 86_400), capacity: 2)
        let first = try mint.leaf(for: "registry.example.org", now: 0)
        let again = try mint.leaf(for: "REGISTRY.example.org", now: day - 1)
        #expect(first.certificate === again.certificate)
        #expect(mint.statistics == .init(minted: 1, hits: 1))
        let renewed = try mint.leaf(for: "registry.example.org", now: day)
        #expect(renewed.certificate !== first.certificate, "half of two days has passed")
        #expect(mint.statistics == .init(minted: 2, hits: 1))

        _ = try mint.leaf(for: "a.files.example.net", now: day + 1)
        _ = try mint.leaf(for: "b.files.example.net", now: day + 2)
        #expect(mint.cachedCount == 2, "bounded")
        let evicted = try mint.leaf(for: "registry.example.org", now: day + 3)
        #expect(evicted.certificate !== renewed.certificate, "the oldest went first")
    }

    @Test func namesTheCAMayNotSignForAreRefused() throws {
        let mint = try CertificateMint(directory: directory, leafValidity: .seconds(86_400))
        for refused in [
            "example.org", "registry.example.org.evil.test", "files.example.network", "10.0.0.1", "::1", "*.files.example.net", "",
        ] {
            #expect(throws: LocalCA.Failure.self, "\(refused)") { try mint.leaf(for: refused, now: 0) }
        }
        #expect(mint.statistics.minted == 0)
    }

    @Test func aMintNeedsAUsableCA() throws {
        #expect(chmod(directory + "/ca.key", 0o644) == 0)
        #expect(throws: LocalCA.Failure.self) { try CertificateMint(directory: self.directory, leafValidity: .seconds(86_400)) }
        #expect(throws: LocalCA.Failure.self) { try CertificateMint(directory: self.directory + "/none", leafValidity: .seconds(86_400)) }
    }
}

import Foundation
import LarderConfig
import Testing

@testable import LarderTLS

/// When `serve` makes the CA: only for interception, only when both files are known to be
/// absent, never over a CA that is there in whole or in part.
@Suite struct CAProvisionTests {
    let hosts = [HostRule(parsing: "files.example.org")!, HostRule(parsing: "*.pkg.example.net")!]

    @Test func aCAIsMadeOnlyForInterceptionAndOnlyWhenBothFilesAreAbsent() {
        #expect(
            LocalCA.provision(intercept: hosts, certificate: .absent, key: .absent)
                == .create(permitting: ["files.example.org", "pkg.example.net"]))
        #expect(LocalCA.provision(intercept: [], certificate: .absent, key: .absent) == .nothing)
        for (certificate, key) in [(LocalCA.FilePresence.present, LocalCA.FilePresence.absent), (.absent, .present), (.present, .present)] {
            #expect(LocalCA.provision(intercept: hosts, certificate: certificate, key: key) == .nothing, "never over part of a CA")
        }
        #expect(LocalCA.provision(intercept: hosts, certificate: .unknown, key: .absent) == .nothing, "left to load to report")
    }

    @Test func createIfMissingMakesItOnceAndKeepsItThen() throws {
        let directory = NSTemporaryDirectory() + "larder-provision-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var tls = TLSConfig()
        tls.caDirectory = directory + "/ca"
        #expect(try LocalCA.createIfMissing(for: tls) == nil, "nothing to intercept")
        #expect(!FileManager.default.fileExists(atPath: tls.caDirectory))
        tls.intercept = hosts
        let made = try #require(try LocalCA.createIfMissing(for: tls))
        #expect(made.permittedDNS == ["files.example.org", "pkg.example.net"])
        let certificate = FileManager.default.contents(atPath: tls.caDirectory + "/ca.pem")
        #expect(try LocalCA.createIfMissing(for: tls) == nil)
        #expect(FileManager.default.contents(atPath: tls.caDirectory + "/ca.pem") == certificate)
        // A dangling link where the key was is something there, not a place to write a key.
        try FileManager.default.removeItem(atPath: tls.caDirectory + "/ca.pem")
        try FileManager.default.removeItem(atPath: tls.caDirectory + "/ca.key")
        try FileManager.default.createSymbolicLink(atPath: tls.caDirectory + "/ca.key", withDestinationPath: directory + "/gone")
        #expect(LocalCA.presence(of: tls.caDirectory + "/ca.key") == .present)
        #expect(try LocalCA.createIfMissing(for: tls) == nil)
    }
}

import LarderHTTP
import Testing

@testable import LarderServer

/// Which request hosts name `proxy.setup_host`: the name itself or its absolute form with the
/// trailing dot (RFC 1034 §3.1), nothing longer, shorter or merely sharing a prefix.
@Suite struct SetupHostNameTests {
    @Test(arguments: [
        ("larder.setup", true),
        ("larder.setup.", true),
        ("larder.setup..", false),
        ("larder.setu", false),
        ("larder.setupx", false),
        ("xlarder.setup", false),
        ("larder.setup.example", false),
        ("", false),
    ])
    func aHostNamesTheSetupPageOnlyAsItselfOrWithItsTrailingDot(host: String, names: Bool) {
        #expect(ClientConnection.names(host, "larder.setup") == names, "\(host)")
    }

    /// The length check every request makes first never turns away a host that names the
    /// setup host, bracketed or not, and turns away every host when there is no setup host.
    @Test(arguments: [
        "larder.setup", "larder.setup.", "larder.setup..", "larder.setu", "larder.setupx", "[larder.setup]", "[larder.setup.]",
        "[::1]", "example.com", "a", "", "larder.setup.example",
    ])
    func theLengthCheckKeepsEveryHostThatNamesTheSetupHost(host: String) {
        let url = AbsoluteURL(scheme: "http", host: host, port: 80, pathAndQuery: "/")
        let setup = "larder.setup"
        let names = ClientConnection.names(url.bareHost, setup)
        let may = ClientConnection.mayName(hostLength: host.utf8.count, setupHostLength: setup.utf8.count)
        #expect(!names || may, "\(host)")
        #expect(may == (host.utf8.count >= setup.utf8.count && host.utf8.count <= setup.utf8.count + 3), "\(host)")
        #expect(!ClientConnection.mayName(hostLength: host.utf8.count, setupHostLength: 0), "\(host)")
    }
}

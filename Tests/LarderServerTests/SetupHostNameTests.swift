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
}

import LarderIO
import Testing

/// The connect-time check reads libcurl's address of the connection as a C string: it must
/// parse exactly as the Swift string form does, and refuse what that refuses.
@Suite struct SocketAddressLiteralTests {
    @Test(arguments: [
        "127.0.0.1", "10.1.2.3", "0.0.0.0", "255.255.255.255", "::1", "::", "fe80::1", "::ffff:127.0.0.1",
        "2001:db8::8a2e:370:7334", "127.1", "0x7f.0.0.1", "localhost", "", " 127.0.0.1", "127.0.0.1 ", "fe80::1%eth0",
        "1.2.3.4.5", "[::1]", "::1:80",
    ])
    func theCStringFormParsesAsTheStringForm(text: String) {
        let fromC = text.withCString { SocketAddress(literal: $0, port: 8080) }
        #expect(fromC == SocketAddress(literal: text, port: 8080))
        if let fromC { #expect(fromC.port == 8080 && fromC.ipString == SocketAddress(literal: text, port: 1)?.ipString) }
    }

    @Test func familiesAndBytes() {
        #expect("127.0.0.1".withCString { SocketAddress(literal: $0, port: 1) }?.ipBytes == [127, 0, 0, 1])
        #expect("::1".withCString { SocketAddress(literal: $0, port: 1) }?.family == .ipv6)
        #expect("127.1".withCString { SocketAddress(literal: $0, port: 1) } == nil, "inet_aton's short forms are not literals")
    }
}

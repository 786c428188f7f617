import LarderHTTP
import LarderIO
import Testing

@testable import LarderServer

/// The onboarding page as a value: which answer each method and path gets, and that nothing
/// written into the HTML or the PAC script can break out of it.
@Suite struct SetupPageTests {
    let page = SetupPage(host: "larder.setup", proxyAddress: "192.0.2.7:3128", authority: nil)

    @Test func readOnlyEverywhere() {
        for path in ["/", "/ca.pem", "/proxy.pac", "/nothing"] {
            for method in [HTTPMethod.post, .put, .delete, HTTPMethod("PATCH")] {
                let answer = page.answer(method: method, path: path)
                #expect(answer.status == 405, "\(method.rawValue) \(path)")
                #expect(answer.headers.contains { $0 == ("Allow", "GET, HEAD") })
            }
        }
    }

    @Test func withoutACATheDownloadsAre404AndThePageSaysHTTPSIsTunnelled() {
        for path in ["/ca.pem", "/ca.der"] {
            let answer = page.answer(method: .get, path: path)
            #expect(answer.status == 404)
            #expect(String(decoding: answer.body, as: UTF8.self).contains("no CA to trust"))
        }
        let html = String(decoding: page.answer(method: .get, path: "/?from=bookmark").body, as: UTF8.self)
        #expect(html.contains("HTTPS is tunnelled, not cached"))
        #expect(!html.contains("ca.pem\">"), "no link to a download that is not there")
        // larder client's setup, escaped: apt's quotes are entities in the HTML.
        #expect(html.contains("Acquire::http::Proxy &quot;http://192.0.2.7:3128&quot;;"), "\(html)")
        #expect(html.contains("<h3 id=\"pip\">"), "\(html)")
        #expect(!html.contains("RHEL"), "without a CA no tool differs between platforms")
        let missing = page.answer(method: .get, path: "/<script>")
        #expect(missing.status == 404 && missing.contentType.hasPrefix("text/plain"))
        #expect(missing.headers.contains { $0 == ("X-Content-Type-Options", "nosniff") })
    }

    @Test func htmlEscapingLeavesNoMarkup() {
        #expect(SetupPage.escape("<script>\"a\" & 'b'</script>") == "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;")
    }

    @Test func pacLiteralsCannotEndTheString() {
        let hostile = "1.2.3.4:1\"; return \"DIRECT\"; //\u{2028}</script>\\"
        let literal = ProxyAutoConfig.literal(hostile)
        #expect(literal.hasPrefix("\"") && literal.hasSuffix("\""))
        let inner = literal.dropFirst().dropLast()
        #expect(!inner.contains("\"") && !inner.contains("\\\\") && !inner.contains("/") && !inner.contains("<"))
        #expect(!inner.unicodeScalars.contains { $0.value == 0x2028 || $0.value < 0x20 })
        #expect(ProxyAutoConfig.literal("PROXY [::1]:3128") == "\"PROXY [::1]:3128\"")
    }

    @Test func pacNamesTheAddressGivenAndTheSetupHost() {
        let text = ProxyAutoConfig(proxy: "[2001:db8::7]:3128", setupHost: "larder.setup").text
        #expect(text.contains("var proxy = \"PROXY [2001:db8::7]:3128\";"))
        #expect(text.contains("if (host === \"larder.setup\") return proxy;"))
        #expect(!ProxyAutoConfig(proxy: "192.0.2.7:3128", setupHost: "").text.contains("host === \"\""))
        let answer = page.answer(method: .head, path: "/proxy.pac")
        #expect(answer.status == 200 && answer.contentType == "application/x-ns-proxy-autoconfig")
    }

    @Test func aMappedAddressIsAdvertisedAsIPv4() {
        let mapped = SocketAddress(ipBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 7], port: 3128)
        #expect(ProxyAutoConfig.advertised(mapped) == "192.0.2.7:3128")
        #expect(ProxyAutoConfig.advertised(SocketAddress(parsing: "[::1]:3128")!) == "[::1]:3128")
    }
}

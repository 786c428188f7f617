import LarderConfig
import Testing

@testable import LarderServer
@testable import LarderTLS

/// The onboarding page's bodies are rendered once per proxy address and configuration
/// generation, and rendered again under a new one (a reload: `setup_host`, the CA or
/// `tls.intercept` changed).
@Suite struct SetupPageCacheTests {
    static func authority(fingerprint: String, intercepted: [String]) -> SetupPage.Authority {
        SetupPage.Authority(
            pem: "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", der: [0x30],
            facts: CertificateFacts(
                subject: "CN=Larder local CA", notAfter: "Nov 23 22:40:01 2036 GMT", secondsLeft: 1,
                sha256Fingerprint: fingerprint, permittedDNS: intercepted, isCA: true),
            intercepted: intercepted.map { HostRule(parsing: $0)! })
    }

    /// Answers `path` from `page` through `cache`, counting renders.
    static func body(
        _ cache: inout SetupPageCache, _ page: SetupPage, _ path: String, generation: Int, renders: inout Int
    ) -> String {
        let answer = page.answer(method: .get, path: path) { document in
            cache.body(document, proxyAddress: page.proxyAddress, generation: generation) {
                renders += 1
                return page.render(document)
            }
        }
        return String(decoding: answer.body, as: UTF8.self)
    }

    @Test func theSameAddressAndGenerationGetTheSameBytesRenderedOnce() {
        var cache = SetupPageCache()
        var renders = 0
        let page = SetupPage(host: "larder.setup", proxyAddress: "192.0.2.7:3128", authority: nil)
        let first = Self.body(&cache, page, "/", generation: 0, renders: &renders)
        for _ in 0..<5 { #expect(Self.body(&cache, page, "/?again", generation: 0, renders: &renders) == first) }
        #expect(renders == 1)
        #expect(first == String(decoding: page.render(.html), as: UTF8.self))

        let pac = Self.body(&cache, page, "/proxy.pac", generation: 0, renders: &renders)
        #expect(pac.contains("PROXY 192.0.2.7:3128") && renders == 2, "the PAC file is kept apart from the page")
        _ = Self.body(&cache, page, "/proxy.pac", generation: 0, renders: &renders)
        #expect(renders == 2)

        let other = SetupPage(host: "larder.setup", proxyAddress: "[2001:db8::7]:3128", authority: nil)
        let otherHTML = Self.body(&cache, other, "/", generation: 0, renders: &renders)
        #expect(otherHTML.contains("Larder at [2001:db8::7]:3128") && renders == 3, "each address its own page")
        #expect(Self.body(&cache, page, "/", generation: 0, renders: &renders) == first && renders == 3)
    }

    @Test func aReloadRendersAgainWithTheNewHostAndCA() {
        var cache = SetupPageCache()
        var renders = 0
        let before = SetupPage(
            host: "larder.setup", proxyAddress: "192.0.2.7:3128",
            authority: Self.authority(fingerprint: "AA:AA", intercepted: ["deb.example.org"]))
        #expect(Self.body(&cache, before, "/", generation: 3, renders: &renders).contains("AA:AA"))

        // A new CA and another intercepted host, same address.
        let newCA = SetupPage(
            host: "larder.setup", proxyAddress: "192.0.2.7:3128",
            authority: Self.authority(fingerprint: "BB:BB", intercepted: ["deb.example.org", "pypi.example.org"]))
        let html = Self.body(&cache, newCA, "/", generation: 4, renders: &renders)
        #expect(html.contains("BB:BB") && !html.contains("AA:AA") && html.contains("pypi.example.org"), "\(html)")
        #expect(renders == 2 && cache.generation == 4 && cache.count == 1, "the old generation's body is dropped")

        // A new setup_host in the PAC file.
        let renamed = SetupPage(host: "cache.lan.test", proxyAddress: "192.0.2.7:3128", authority: nil)
        _ = Self.body(&cache, before, "/proxy.pac", generation: 4, renders: &renders)
        let pac = Self.body(&cache, renamed, "/proxy.pac", generation: 5, renders: &renders)
        #expect(pac.contains("host === \"cache.lan.test\"") && renders == 4, "\(pac)")

        // A request still under an older configuration gets its own page and leaves the cache be.
        #expect(Self.body(&cache, before, "/", generation: 3, renders: &renders).contains("AA:AA") && renders == 5)
        #expect(cache.generation == 5 && cache.count == 1)
        #expect(Self.body(&cache, renamed, "/proxy.pac", generation: 5, renders: &renders) == pac && renders == 5)

        cache.removeAll()
        _ = Self.body(&cache, renamed, "/proxy.pac", generation: 5, renders: &renders)
        #expect(renders == 6)
    }

    @Test func aLoopKeepsAtMostCapacityBodies() {
        var cache = SetupPageCache()
        var renders = 0
        for index in 0..<(SetupPageCache.capacity * 3) {
            let page = SetupPage(host: "larder.setup", proxyAddress: "192.0.2.\(index):3128", authority: nil)
            _ = Self.body(&cache, page, "/proxy.pac", generation: 0, renders: &renders)
            #expect(cache.count <= SetupPageCache.capacity)
        }
        #expect(renders == SetupPageCache.capacity * 3 && cache.count == SetupPageCache.capacity)
    }
}

import Foundation
import LarderConfig
import LarderIO
import Testing

/// The configuration side of a safe admin API: empty secrets are unset, query redaction, and
/// the warnings about settings that let strangers in.
@Suite struct AdminSafetyConfigTests {
    private func parse(_ text: String) -> Result<Config, ConfigErrors> { ConfigLoader.parse(text, file: "t.toml") }

    @Test func emptyTokenAndTokenFileMeanUnsetSoAFileNextToAnEmptyTokenIsNoConflict() throws {
        let stock = try parse("[admin]\ntoken = \"\"\ntoken_file = \"\"\n").get()
        #expect(stock.admin.token.isEmpty && stock.admin.tokenFile.isEmpty)
        let directory = NSTemporaryDirectory() + "larder-token-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "from-file\n".write(toFile: directory + "/token", atomically: true, encoding: .utf8)
        let withFile = try parse("[admin]\ntoken = \"\"\ntoken_file = \"\(directory)/token\"\n").get()
        #expect(withFile.admin.token == "from-file")
        guard case .failure(let errors) = parse("[admin]\ntoken = \"x\"\ntoken_file = \"\(directory)/token\"\n") else {
            Issue.record("a token and a token file together must still be refused")
            return
        }
        #expect(errors.description.contains("not both"))
    }

    @Test func redactionHidesCoveredValuesCaseInsensitivelyAndKeepsTheRest() {
        let redaction = QueryRedaction(names: QueryRedaction.defaultNames)
        #expect(redaction.redacted("http://h/p") == nil, "no query: nothing to do")
        #expect(redaction.redacted("http://h/p?page=2&sort=a") == nil, "nothing covered: no copy")
        #expect(
            redaction.redacted("https://b.s3.example/k?X-Amz-Credential=AKIA%2F1&x-amz-signature=abc&versionId=3")
                == "https://b.s3.example/k?X-Amz-Credential=REDACTED&x-amz-signature=REDACTED&versionId=3")
        #expect(redaction.redacted("http://h/f?sv=1&SIG=s3cr3t&se=2030") == "http://h/f?sv=1&SIG=REDACTED&se=REDACTED")
        #expect(
            redaction.redacted("http://h/a?access_token=t&client_secret=c&TOKEN=u")
                == "http://h/a?access_token=REDACTED&client_secret=REDACTED&TOKEN=REDACTED")
        #expect(redaction.redacted("http://h/a?token=&token") == nil, "no value, nothing to hide")
        #expect(redaction.redacted("debian:pool/x.deb?sig=1") == "debian:pool/x.deb?sig=REDACTED", "keys a route built too")
        #expect(QueryRedaction(names: []).redacted("http://h/?sig=1") == nil)
    }

    @Test func redactionSeesEncodedNamesSemicolonsAndUrlsInsideValues() {
        let redaction = QueryRedaction(names: QueryRedaction.defaultNames)
        // The origin decodes `X%2DAmz%2DSignature` to the signature's name.
        #expect(
            redaction.redacted("http://h/k?X%2DAmz%2DSignature=s1&%74oken=s2&p%61ge=3")
                == "http://h/k?X%2DAmz%2DSignature=REDACTED&%74oken=REDACTED&p%61ge=3")
        // `;` separates parameters for servers that follow HTML 4's advice; repeated names all go.
        #expect(redaction.redacted("http://h/k?a=1;sig=s3;token=a&token=b") == "http://h/k?a=1;sig=REDACTED;token=REDACTED&token=REDACTED")
        // The admin API's own targets carry a URL in a value: POST /purge?url=, ?prefix=.
        #expect(
            redaction.redacted("/purge?url=http%3A%2F%2Fh%2Ff%3Ftoken%3Ds4%26v%3D1")
                == "/purge?url=http://h/f%3Ftoken%3DREDACTED%26v%3D1")
        #expect(redaction.redacted("/purge?url=http://h/f?sig=s5") == "/purge?url=http://h/f?sig=REDACTED")
        #expect(redaction.redacted("/purge?url=http%3A%2F%2Fh%2Ff%3Fv%3D1") == nil, "nothing covered inside: as it came")
        // One level only: a value inside a value is not looked into.
        #expect(redaction.redacted("/p?u=http://h/?v=http://i/?sig=1") == nil)
        // A slice's key keeps its index after the hidden value.
        #expect(redaction.redacted("http://h/f?sig=ab&v=1#slice=3") == "http://h/f?sig=REDACTED&v=1#slice=3")
        #expect(redaction.redacted("http://h/f?v=1#slice=3") == nil)
        // A listing's prefix stops where a hidden value starts.
        #expect(redaction.visiblePrefix("http://h/f?page=2&sig=ab") == "http://h/f?page=2&sig=")
        #expect(redaction.visiblePrefix("http://h/f?X%2DAmz%2DSignature=a&b=1") == "http://h/f?X%2DAmz%2DSignature=")
        #expect(redaction.visiblePrefix("/p?url=http%3A%2F%2Fh%2F%3Ftoken%3Da") == "/p?url=")
        for open in ["http://h/f?page=2&sig=", "http://h/f?page=2&X-Amz-Sig", "http://h/f", "http://h/f?page=2"] {
            #expect(redaction.visiblePrefix(open) == open)
        }
        #expect(redaction.coversField("Authorization") && redaction.coversField("cookie") && redaction.coversField("X-Auth-Token"))
        #expect(!redaction.coversField("Accept-Encoding"))
    }

    @Test func redactQueryIsDecodedAndCheckedAndAllowHostsToo() throws {
        let parsed = try parse(
            "[log]\nredact_query = [\"mysig\", \"Auth-*\"]\n[admin]\nallow_hosts = [\"Larder.Internal\", \"proxy:8080\"]\n"
        )
        .get()
        #expect(parsed.log.redactQuery.names == ["mysig", "Auth-*"])
        #expect(parsed.log.redactQuery.redacted("http://h/?auth-x=1&sig=2") == "http://h/?auth-x=REDACTED&sig=2")
        #expect(parsed.admin.allowHosts == ["larder.internal", "proxy:8080"])
        #expect(Config().log.redactQuery.names == QueryRedaction.defaultNames)
        for bad in ["[log]\nredact_query = [\"a=b\"]\n", "[admin]\nallow_hosts = [\"http://x/\"]\n", "[admin]\nallow_hosts = [\"\"]\n"] {
            guard case .failure(let errors) = parse(bad) else {
                Issue.record("\(bad) must be refused")
                continue
            }
            #expect(errors.description.contains("t.toml:"), "\(errors)")
        }
    }

    @Test func warnsAboutAnOpenProxyAndATokenlessExposedAdminOnly() throws {
        let any = SocketAddress(parsing: "0.0.0.0:3128")!
        let loopback = SocketAddress(parsing: "127.0.0.1:3128")!
        let publicAdmin = SocketAddress(parsing: "[::]:3129")!
        var open = Config()
        open.proxy.allow = [CIDR(parsing: "10.0.0.0/8")!, CIDR(parsing: "::/0")!]
        let anyIPv6 = SocketAddress(parsing: "[::]:3128")!
        let warnings = DangerousSettings.warnings(open, proxyListeners: [loopback, anyIPv6], adminListener: publicAdmin)
        #expect(warnings.count == 2, "\(warnings)")
        #expect(warnings.first?.contains("open proxy") == true && warnings.first?.contains("[::]:3128") == true)
        #expect(warnings.last?.contains("admin listener [::]:3129") == true)

        // Each condition alone is harmless: loopback only, a narrower allow, users, a token.
        #expect(DangerousSettings.warnings(open, proxyListeners: [loopback], adminListener: loopback).isEmpty)
        #expect(DangerousSettings.warnings(Config(), proxyListeners: [any], adminListener: nil).isEmpty)
        var users = open
        users.proxy.authUsers = [ProxyUser(name: "a", passwordHash: "$y$x")]
        users.admin.token = "t"
        #expect(DangerousSettings.warnings(users, proxyListeners: [any], adminListener: publicAdmin).isEmpty)
    }

    @Test func openProxyWarningSeesEveryAddressHoweverTheAllowListSplitsIt() {
        func open(_ rules: [String], on listener: String) -> Bool {
            var config = Config()
            config.proxy.allow = rules.map { CIDR(parsing: $0)! }
            return !DangerousSettings.warnings(config, proxyListeners: [SocketAddress(parsing: listener)!], adminListener: nil).isEmpty
        }
        // Halves, quarters and a stray host besides: still everyone.
        #expect(open(["0.0.0.0/1", "128.0.0.0/1"], on: "0.0.0.0:3128"))
        #expect(open(["10.0.0.0/8", "0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"], on: "192.0.2.1:3128"))
        #expect(open(["::/1", "8000::/1"], on: "[::]:3128"))
        #expect(open(["::/0"], on: "[2001:db8::1]:3128"))
        // A dual-stack socket from systemd admits IPv4 clients as ::ffff:a.b.c.d.
        #expect(open(["::ffff:0:0/97", "::ffff:128.0.0.0/97"], on: "[::]:3128"))
        #expect(open(["0.0.0.0/0"], on: "[::]:3128"))
        // Not everyone: one half, a gap, or rules of the other family than the listener's.
        #expect(!open(["0.0.0.0/1"], on: "0.0.0.0:3128"))
        #expect(!open(["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4"], on: "0.0.0.0:3128"))
        #expect(!open(["::/0"], on: "0.0.0.0:3128"), "an IPv4 socket has no IPv6 clients")
        #expect(!open(["10.0.0.0/8", "2001:db8::/32"], on: "[::]:3128"))
    }
}

import LarderConfig
import LarderIO
import Testing

@testable import LarderServer

/// The client setup generator: pure values from a proxy URL, a CA and a platform.
@Suite struct ClientSetupTests {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    var authority: ClientSetup.Authority {
        ClientSetup.Authority(
            pem: pem, sha256Fingerprint: "AA:BB", hosts: [HostRule(parsing: "deb.example.org")!, HostRule(parsing: "*.pypi.test")!])
    }

    func text(of file: SetupFile) -> String {
        guard case .text(let text) = file.content else { return "" }
        return text
    }

    @Test func aptTrustsTheBundlePerHostNeverGlobally() throws {
        let apt = try #require(ClientSetup(proxyURL: "http://10.0.0.2:3128", authority: authority).tool(named: "apt"))
        let conf = text(of: apt.files[0])
        #expect(apt.files[0].path == "/etc/apt/apt.conf.d/80larder-proxy")
        #expect(conf.contains("Acquire::http::Proxy \"http://10.0.0.2:3128\";"))
        #expect(conf.contains("Acquire::https::Proxy \"http://10.0.0.2:3128\";"))
        #expect(conf.contains("Acquire::https::deb.example.org::CaInfo \"/etc/larder/ca-bundle.pem\";"))
        #expect(!conf.contains("Acquire::https::CaInfo"))
        #expect(apt.notes.contains { $0.contains("*.pypi.test") })
        #expect(apt.requires == ["ca-bundle"])
    }

    @Test func singleFileToolsGetTheBundleAndAddingToolsTheCAAlone() throws {
        let setup = ClientSetup(proxyURL: "http://10.0.0.2:3128", authority: authority)
        let pip = try #require(setup.tool(named: "pip"))
        #expect(text(of: pip.files[0]).contains("cert = /etc/larder/ca-bundle.pem"))
        #expect(pip.environment.allSatisfy { $0.value == ClientSetup.bundleFile })
        let npm = try #require(setup.tool(named: "npm"))
        #expect(npm.environment.contains(.init("NODE_EXTRA_CA_CERTS", ClientSetup.caFile)))
        let docker = try #require(setup.tool(named: "docker"))
        #expect(docker.files.map(\.path).contains("/etc/docker/certs.d/deb.example.org/larder-ca.crt"))
        for tool in setup.tools {
            for variable in tool.environment where variable.name != "NODE_EXTRA_CA_CERTS" {
                #expect(
                    variable.value != ClientSetup.caFile, "\(tool.name) \(variable.name) would replace the roots with Larder's CA alone")
            }
        }
    }

    @Test func theBundleIsTheSystemStoreThenTheCAAndKeptInStep() throws {
        let debian = try #require(ClientSetup(proxyURL: "http://h:1", authority: authority, platform: .debian).tool(named: "ca-bundle"))
        #expect(debian.files[1].content == .concatenation(["/etc/ssl/certs/ca-certificates.crt", ClientSetup.caFile]))
        #expect(debian.files[2].path == "/etc/ca-certificates/update.d/larder-bundle" && debian.files[2].mode == 0o755)
        let rhel = try #require(ClientSetup(proxyURL: "http://h:1", authority: authority, platform: .rhel).tool(named: "ca-bundle"))
        #expect(rhel.files[1].content == .concatenation(["/etc/pki/tls/certs/ca-bundle.crt", ClientSetup.caFile]))
        let unit = try #require(rhel.files.first { $0.path.hasSuffix("larder-ca-bundle.path") })
        // Run once --undo has removed the unit: `systemctl disable` would then say it failed.
        let after = try #require(unit.afterRemoval)
        #expect(after.contains("rm -f /etc/systemd/system/paths.target.wants/larder-ca-bundle.path") && !after.contains("disable"))
    }

    @Test func withoutInterceptionOnlyTheProxyIsSetUp() {
        let setup = ClientSetup(proxyURL: "http://10.0.0.2:3128", authority: nil)
        #expect(setup.tool(named: "ca-bundle") == nil && setup.tool(named: "system-store") == nil)
        #expect(setup.notes.joined().contains("not cached"))
        for tool in setup.tools {
            for file in tool.files {
                if case .text(let text) = file.content { #expect(!text.contains("ca-bundle.pem") && !text.contains("larder-ca")) }
            }
            #expect(!tool.requires.contains("ca-bundle"))
        }
    }

    @Test func proxyURLsThatCouldBreakOutOfAConfigFileAreRefused() {
        #expect(ClientSetup.checkedProxyURL("http://192.168.1.5:3128/") == "http://192.168.1.5:3128")
        #expect(ClientSetup.checkedProxyURL("http://[::1]:3128") == "http://[::1]:3128")
        #expect(ClientSetup.checkedProxyURL("http://alice:s3cret@proxy.lan:3128") == "http://alice:s3cret@proxy.lan:3128")
        for bad in [
            "https://proxy:3128", "http://proxy", "http://proxy:3128/path", "http://pro\"xy:3128", "http://proxy:3128\n",
            "http://a b:1", "http://proxy:99999", "http://%41:1", "http://[zz]:1", "http://x:1;rm",
        ] {
            #expect(ClientSetup.checkedProxyURL(bad) == nil, "\(bad)")
        }
    }

    @Test func aWildcardListenerIsSaidToNeedTheLANAddress() throws {
        let any = try #require(ClientSetup.proxyURL(listeningOn: [SocketAddress(parsing: "0.0.0.0:3128")!]))
        #expect(any.isWildcard && any.url == "http://0.0.0.0:3128")
        let loopback = try #require(ClientSetup.proxyURL(listeningOn: [SocketAddress(parsing: "[::1]:3128")!]))
        #expect(!loopback.isWildcard && loopback.url == "http://[::1]:3128")
    }

    @Test func daemonDropInsDoubleThePercentSign() throws {
        let docker = try #require(ClientSetup(proxyURL: "http://a%25b:1", authority: nil).tool(named: "docker"))
        #expect(text(of: docker.files[0]).contains("\"HTTP_PROXY=http://a%%25b:1\""))
    }
}

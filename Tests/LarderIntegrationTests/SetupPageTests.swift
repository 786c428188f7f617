import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// The onboarding page at `http://larder.setup/` through the proxy (`proxy.setup_host`):
    /// answered by Larder itself, never forwarded; its CA downloads verify an intercepted host;
    /// its PAC file, run in a real JavaScript engine, names the address the client reached.
    @Suite(.timeLimit(.minutes(3))) struct SetupPage {
        /// Runs Fixtures/pac_eval.js on `pac` for `urls`: what FindProxyForURL returns for each.
        private func evaluate(_ pac: String, _ urls: [String]) throws -> [String: String] {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try pac.write(toFile: directory + "/proxy.pac", atomically: true, encoding: .utf8)
            let node = try ChildProcess(
                "/usr/bin/env",
                ["node", Paths.root + "/Tests/LarderIntegrationTests/Fixtures/pac_eval.js", directory + "/proxy.pac"] + urls)
            node.waitUntilExit()
            guard node.terminationStatus == 0 else { throw TestFailure("pac_eval.js: \(node.stderr)") }
            var answers: [String: String] = [:]
            for line in node.stdout.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 1)
                if parts.count == 2 { answers[String(parts[0])] = String(parts[1]) }
            }
            return answers
        }

        /// Names the tests use pinned to loopback, so that a build without the page (which
        /// forwards them) asks no DNS server.
        private func pins(_ names: [String] = ["larder.setup"], ports: [Int] = []) -> String {
            let entries = names.flatMap { name in ([80, 443, 8080] + ports).map { "\"\(name):\($0):127.0.0.1\"" } }
            return "[upstream]\nresolve = [\(entries.joined(separator: ", "))]\n"
        }

        private var hasNode: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/node") }

        private func openssl(_ arguments: [String]) throws -> String {
            let child = try ChildProcess("/usr/bin/env", ["openssl"] + arguments)
            child.waitUntilExit()
            return child.stdout
        }

        @Test func pageAndCAAreLardersOwnAndTheDownloadedCAVerifiesAnInterceptedHost() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let tlsOrigin = try setup.origin()
            // The setup name pinned to a real origin: were it ever forwarded, this origin would see it.
            let origin = try Origin()
            let larder = try Larder(
                config: setup.config(ports: [tlsOrigin.port, 443]) + "\n" + pins(ports: [origin.port]))

            let page = try Curl.viaProxy(larder.proxy, ["http://larder.setup/"])
            #expect(page.status == 200, "\(page.text)")
            #expect(page.header("content-type") == "text/html; charset=utf-8")
            #expect(page.header("cache-control") == "no-store")
            let fingerprint =
                try openssl(["x509", "-in", setup.larderCA, "-noout", "-fingerprint", "-sha256"])
                .split(separator: "=").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
            #expect(fingerprint.count == 95 && page.text.contains(fingerprint), "the CA's SHA-256 fingerprint is on the page")
            #expect(page.text.contains("<dt>May sign for (Name Constraints)</dt><dd>localhost</dd>"), "\(page.text)")
            #expect(page.text.contains("http_proxy=http://127.0.0.1:\(larder.proxyPort)"))
            #expect(!page.text.contains(setup.directory), "no file path of the proxy's host")
            // larder client's setup per tool, for both CA-store families: apt trusts the CA per
            // intercepted host, and the certificate itself is there to copy.
            #expect(page.text.contains("Acquire::https::localhost::CaInfo &quot;/etc/larder/ca-bundle.pem&quot;;"), "\(page.text)")
            #expect(page.text.contains("update-ca-certificates") && page.text.contains("update-ca-trust"))
            let pemLine = try String(contentsOfFile: setup.larderCA, encoding: .utf8).split(separator: "\n")[1]
            #expect(page.text.contains(pemLine))

            let pinned = try Curl.viaProxy(larder.proxy, ["http://LARDER.setup:\(origin.port)/ca.pem"])
            #expect(pinned.status == 200 && pinned.header("content-type") == "application/x-pem-file")
            #expect(pinned.header("content-disposition") == "attachment; filename=\"larder-ca.pem\"")
            let rooted = try Curl.viaProxy(larder.proxy, ["http://larder.setup.:\(origin.port)/proxy.pac"])
            #expect(rooted.status == 200 && rooted.header("content-type") == "application/x-ns-proxy-autoconfig", "\(rooted.text)")
            #expect(try origin.total() == 0, "the setup host never reaches an origin")

            let der = try Curl.viaProxy(larder.proxy, ["http://larder.setup/ca.der"])
            #expect(der.status == 200 && der.header("content-type") == "application/x-x509-ca-cert")
            #expect(der.header("content-disposition") == "attachment; filename=\"larder-ca.der\"")
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try der.body.write(to: URL(fileURLWithPath: directory + "/ca.der"))
            let derFingerprint = try openssl(["x509", "-inform", "der", "-in", directory + "/ca.der", "-noout", "-fingerprint", "-sha256"])
            #expect(derFingerprint.contains(fingerprint), "\(derFingerprint)")

            // The PEM as downloaded is what a second machine trusts: curl verifies the intercepted host with it.
            let pem = try Curl.viaProxy(larder.proxy, ["http://larder.setup/ca.pem"])
            try pem.body.write(to: URL(fileURLWithPath: directory + "/downloaded.pem"))
            let verified = try setup.curl(larder, tlsOrigin.url("/pkg?size=1000"), trusting: directory + "/downloaded.pem")
            #expect(verified.exitCode == 0 && verified.status == 200 && verified.body.count == 1000, "\(verified.stderr)")
            #expect(try tlsOrigin.count("/pkg?size=1000") == 1)

            let head = try Curl.viaProxy(larder.proxy, ["-I", "http://larder.setup/ca.pem"])
            #expect(head.status == 200 && !head.text.contains("BEGIN CERTIFICATE"), "HEAD sends no body")
            let missing = try Curl.viaProxy(larder.proxy, ["http://larder.setup/ca.key"])
            #expect(missing.status == 404 && missing.text.contains("/ca.pem, /ca.der or /proxy.pac"), "\(missing.text)")
            let posted = try Curl.viaProxy(larder.proxy, ["-X", "POST", "-d", "x=1", "http://larder.setup/"])
            #expect(posted.status == 405 && posted.header("allow") == "GET, HEAD")

            // HTTPS to the name is refused here rather than tunnelled to whatever DNS says.
            let tunnel = try Curl.viaProxy(larder.proxy, ["https://larder.setup/"])
            #expect(tunnel.exitCode != 0 && tunnel.stderr.contains("403"), "\(tunnel.stderr)")
            try larder.child.waitForOutput { $0.contains("refused CONNECT to the setup page's host") }
            // Each answer has its access line on the proxy port, as outcome admin.
            try larder.child.waitForOutput(stream: \.stdout) { $0.contains("\"GET http://larder.setup/ca.der\" 200 admin") }
            #expect(try origin.total() == 0)
        }

        @Test func pacSendsThroughTheAddressReachedWhateverTheClientWrites() throws {
            let larder = try Larder(config: "[admin]\ntoken = \"s3cret\"\n" + pins(), listen: ["127.0.0.1:0"])
            let expected = "PROXY 127.0.0.1:\(larder.proxyPort)"
            // Host and the request line are the client's to write: neither moves the address.
            let hostile = try Curl.viaProxy(
                larder.proxy, ["-H", "Host: evil.example:1", "http://larder.setup:8080/proxy.pac?x=%22%2Balert(1)"])
            #expect(hostile.status == 200 && hostile.header("content-type") == "application/x-ns-proxy-autoconfig")
            #expect(hostile.text.contains("var proxy = \"\(expected)\";"), "\(hostile.text)")
            #expect(!hostile.text.contains("evil") && !hostile.text.contains("8080") && !hostile.text.contains("alert"))

            // Opened as if the proxy were a web server, it says where the page is.
            let direct = try Curl.run(["http://127.0.0.1:\(larder.proxyPort)/"])
            #expect(direct.status == 400 && direct.text.contains("then open http://larder.setup/ through the proxy"), "\(direct.text)")

            // The admin listener serves it without the token, as its other read-only pages.
            let admin = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/proxy.pac"])
            #expect(admin.status == 200 && admin.text == hostile.text, "\(admin.text)")
            let postAdmin = try Curl.run(["-X", "POST", "http://127.0.0.1:\(larder.adminPort)/proxy.pac"])
            #expect(postAdmin.status == 405)

            // Over IPv6 the address is the IPv6 one reached; without a CA, HTTPS is said to be tunnelled.
            let six = try Larder(config: pins(), listen: ["[::1]:0"])
            let pac6 = try Curl.viaProxy("http://[::1]:\(six.proxyPort)", ["http://larder.setup/proxy.pac"])
            #expect(pac6.text.contains("var proxy = \"PROXY [::1]:\(six.proxyPort)\";"), "\(pac6.text)")
            let page = try Curl.viaProxy("http://[::1]:\(six.proxyPort)", ["http://larder.setup/"])
            #expect(page.status == 200 && page.text.contains("HTTPS is tunnelled, not cached"), "\(page.text)")
            let noCA = try Curl.viaProxy("http://[::1]:\(six.proxyPort)", ["http://larder.setup/ca.pem"])
            #expect(noCA.status == 404 && noCA.text.contains("tls.intercept is empty"), "\(noCA.text)")

            let urls = [
                "http://deb.example.org/debian/", "https://pypi.example.org/simple/", "http://larder.setup/", "http://intranet/",
                "http://localhost:8080/", "http://10.1.2.3/", "http://172.31.0.1/", "http://172.32.0.1/", "http://192.168.1.1/",
                "http://8.8.8.8/", "http://[fd00::1]/", "http://[2001:db8::1]/", "http://[::1]/", "ftp://files.example.org/",
            ]
            guard hasNode else {
                #expect(hostile.text.contains("isInNet(host, \"10.0.0.0\", \"255.0.0.0\")"))
                return
            }
            let answers = try evaluate(hostile.text, urls)
            for url in [
                "http://deb.example.org/debian/", "https://pypi.example.org/simple/", "http://larder.setup/", "http://172.32.0.1/",
                "http://8.8.8.8/", "http://[2001:db8::1]/",
            ] {
                #expect(answers[url] == expected, "\(url): \(answers[url] ?? "nothing")")
            }
            for url in [
                "http://intranet/", "http://localhost:8080/", "http://10.1.2.3/", "http://172.31.0.1/", "http://192.168.1.1/",
                "http://[fd00::1]/", "http://[::1]/", "ftp://files.example.org/",
            ] {
                #expect(answers[url] == "DIRECT", "\(url): \(answers[url] ?? "nothing")")
            }
        }

        @Test func theNameIsConfigurableOffWhenEmptyAndBehindTheProxysAuthentication() throws {
            let origin = try Origin()
            let pin = pins(["larder.setup", "cache.lan.test"], ports: [origin.port])
            let off = try Larder(config: "[proxy]\nsetup_host = \"\"\n" + pin)
            let forwarded = try Curl.viaProxy(off.proxy, ["http://larder.setup:\(origin.port)/"])
            #expect(forwarded.status == 200 && !forwarded.text.contains("Larder at"))
            #expect(try origin.count("/") == 1, "with setup_host = \"\" the name is an ordinary host")

            let alice = try hashPassword(user: "alice", password: "pw")
            let named = try Larder(config: "[proxy]\nsetup_host = \"Cache.LAN.test\"\nauth_users = [\"\(alice)\"]\n" + pin)
            let challenged = try Curl.viaProxy(named.proxy, ["http://cache.lan.test:\(origin.port)/"])
            #expect(challenged.status == 407, "the page is for the proxy's users only")
            let page = try Curl.viaProxy(named.proxy, ["--proxy-user", "alice:pw", "http://cache.lan.test:\(origin.port)/"])
            #expect(page.status == 200 && page.text.contains("Larder at 127.0.0.1:\(named.proxyPort)"), "\(page.text)")
            let pac = try Curl.viaProxy(named.proxy, ["--proxy-user", "alice:pw", "http://cache.lan.test/proxy.pac"])
            #expect(pac.text.contains("if (host === \"cache.lan.test\") return proxy;"), "\(pac.text)")
            #expect(try origin.count("/") == 1, "nothing more reached the origin")
        }

        /// Walk 77 F9: `larder stats` listed the onboarding page among the hosts it caches,
        /// "0 % from cache". F4: nothing on the admin side led to the page: the start-up line
        /// and the dashboard name it now.
        @Test func theOwnPageIsNoHostInTheStatisticsAndTheAdminSideNamesIt() throws {
            let larder = try Larder(config: pins())
            #expect(try Curl.viaProxy(larder.proxy, ["http://larder.setup/"]).status == 200)
            let hosts = try larder.stats().topHosts.map(\.host)
            #expect(!hosts.contains { $0.hasPrefix("larder.setup") }, "\(hosts)")
            #expect(larder.child.stderr.contains("setup_page=http://larder.setup/"))
            let dashboard = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/"]).text
            #expect(dashboard.contains("<code>larder.setup</code>") && dashboard.contains("larder client"))
        }

        /// The page and the PAC file are kept rendered per loop (one loop here, so the copies
        /// asked for before the reload are the ones a stale page would come from), and a reload
        /// shows its CA, its intercepted hosts and its setup_host at once.
        @Test func aReloadChangesThePageAndThePACFile() throws {
            let setup = try InterceptionSetup()
            defer { setup.remove() }
            let origin = try Origin()
            let pin = pins(["larder.setup", "cache.lan.test"], ports: [origin.port])
            let larder = try Larder(config: setup.config(ports: [443], intercept: "[]", extra: pin, proxy: "workers = 1"))
            for _ in 0..<3 {
                let page = try Curl.viaProxy(larder.proxy, ["http://larder.setup/"])
                #expect(page.status == 200 && page.text.contains("HTTPS is tunnelled, not cached"), "\(page.text)")
                let pac = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/proxy.pac"])
                #expect(pac.text.contains("if (host === \"larder.setup\") return proxy;"), "\(pac.text)")
            }

            try larder.reload(
                setup.config(ports: [443], extra: pin, proxy: "workers = 1\nsetup_host = \"cache.lan.test\""))
            let page = try Curl.viaProxy(larder.proxy, ["http://cache.lan.test/"])
            #expect(page.status == 200 && !page.text.contains("HTTPS is tunnelled, not cached"), "\(page.text)")
            #expect(page.text.contains("<dt>Intercepted hosts (tls.intercept)</dt><dd>localhost</dd>"), "\(page.text)")
            #expect(page.text.contains("<a href=\"/ca.pem\">"), "\(page.text)")
            let pac = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/proxy.pac"])
            #expect(pac.text.contains("if (host === \"cache.lan.test\") return proxy;"), "\(pac.text)")
            let proxied = try Curl.viaProxy(larder.proxy, ["http://cache.lan.test/proxy.pac"])
            #expect(proxied.text.contains("if (host === \"cache.lan.test\") return proxy;"), "\(proxied.text)")
            #expect(try origin.count("/") == 0, "neither name reached the origin")
        }
    }
}

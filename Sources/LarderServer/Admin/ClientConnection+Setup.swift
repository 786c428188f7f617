import LarderHTTP
import LarderIO

/// The onboarding page (``SetupPage``) on the proxy port, and `/proxy.pac` on the admin
/// listener. A request reaches here only after the listener's `proxy.allow` check and proxy
/// authentication, like any proxied request; it is answered here, never forwarded, stored or
/// resolved.
extension ClientConnection {
    /// Answers a request for `proxy.setup_host` and returns true; false for any other host.
    /// Every proxied request asks: a host of another length is told apart without a string
    /// being copied or compared.
    func answersSetupPage(_ url: AbsoluteURL, exchange: Exchange) -> Bool {
        guard Self.mayName(hostLength: url.host.utf8.count, setupHostLength: exchange.runtime.setupHostLength) else { return false }
        let host = exchange.runtime.config.proxy.setupHost
        guard Self.names(url.bareHost, host) else { return false }
        exchange.outcome = .admin
        // The address this client reached, never one it wrote (Host, the request line): the
        // page and the PAC tell other programs where the proxy is.
        guard let local = (try? socket.localAddress()) ?? nil else {
            respondGenerated(status: 500, message: "Larder: the proxy's own address cannot be read", outcome: .error)
            return true
        }
        let runtime = exchange.runtime
        let authority = runtime.interceptor.map { interceptor in
            SetupPage.Authority(
                pem: interceptor.mint.authorityPEM, der: interceptor.mint.authorityDER, facts: interceptor.mint.facts,
                intercepted: runtime.config.tls.intercept)
        }
        let page = SetupPage(host: host, proxyAddress: ProxyAutoConfig.advertised(local), authority: authority)
        send(page.answer(method: exchange.head.method, path: url.pathAndQuery) { rendered($0, of: page, runtime: runtime) })
        return true
    }

    /// Refuses a CONNECT to `proxy.setup_host` (403): the page is served over plain HTTP only,
    /// and the name must never reach DNS or an origin.
    func refusesSetupTunnel(host: String, exchange: Exchange) -> Bool {
        let setupHost = exchange.runtime.config.proxy.setupHost
        guard !setupHost.isEmpty, Self.names(host.lowercased(), setupHost) else { return false }
        exchange.keepAlive = false
        proxy.logger.notice(
            "refused CONNECT to the setup page's host: it is served over plain HTTP",
            metadata: ["client": "\(peer?.description ?? "-")", "target": "\(host)"])
        respondGenerated(
            status: 403, message: "Larder: \(setupHost) is this proxy's own page, over plain HTTP only: open http://\(setupHost)/",
            outcome: .error)
        return true
    }

    /// `/proxy.pac` on the admin listener: the first proxy listener's address, with the
    /// address this client reached the admin listener on when that listener is a wildcard.
    func answerAdminPAC(_ exchange: Exchange) {
        let local = (try? socket.localAddress()) ?? nil
        guard var address = proxy.process.ownAddresses.withLock({ $0.proxy.first }) else {
            return respondAdmin(503, text: "no proxy listener is open")
        }
        if address.isUnspecified, let local {
            address = SocketAddress(ipBytes: local.unmapped.ipBytes, port: address.port)
        }
        let runtime = exchange.runtime
        let page = SetupPage(host: runtime.config.proxy.setupHost, proxyAddress: ProxyAutoConfig.advertised(address), authority: nil)
        send(page.answer(method: exchange.head.method, path: "/proxy.pac") { rendered($0, of: page, runtime: runtime) })
    }

    /// `document` of `page` as this loop rendered it under `runtime`, the address being the
    /// only other thing it depends on.
    private func rendered(_ document: SetupPage.Document, of page: SetupPage, runtime: RuntimeConfig) -> [UInt8] {
        proxy.setupPages.body(document, proxyAddress: page.proxyAddress, generation: runtime.generation) {
            page.render(document)
        }
    }

    /// Where a client that reached the proxy port as if it were a web server learns more.
    func setupPageHint(_ exchange: Exchange) -> String {
        let host = exchange.runtime.config.proxy.setupHost
        return host.isEmpty ? "" : "; then open http://\(host)/ through the proxy for the CA and each tool's setup"
    }

    /// Whether a URL's host of `hostLength` bytes, brackets included, may name a setup host of
    /// `setupHostLength` (0: none): the bare host ``names(_:_:)`` compares is that long or one
    /// byte longer, and two bytes shorter than the host when it is bracketed.
    static func mayName(hostLength: Int, setupHostLength: Int) -> Bool {
        setupHostLength > 0 && UInt(bitPattern: hostLength &- setupHostLength) <= 3
    }

    /// Whether `host` (lower-case) is `setupHost`, written with or without the root's trailing
    /// dot (RFC 1034 §3.1): `larder.setup.` must not slip past to DNS either.
    static func names(_ host: String, _ setupHost: String) -> Bool {
        // Every proxied request asks: most hosts differ in length, which costs no byte compare.
        let length = host.utf8.count
        guard length == setupHost.utf8.count || length == setupHost.utf8.count + 1 else { return false }
        return host == setupHost || (host.utf8.last == UInt8(ascii: ".") && host.utf8.dropLast().elementsEqual(setupHost.utf8))
    }

    private func send(_ response: SetupPage.Response) {
        respondAdmin(
            .init(
                status: response.status, contentType: response.contentType, body: response.body,
                fields: response.headers.map { .init(name: $0.0, value: $0.1) }))
    }
}

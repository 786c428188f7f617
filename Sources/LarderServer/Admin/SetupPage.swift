import LarderConfig
import LarderHTTP
import LarderTLS

/// The onboarding page Larder answers itself at `http://<proxy.setup_host>/` for clients
/// already pointed at it (as mitmproxy's mitm.it): what the proxy is, the CA certificate to
/// trust (`/ca.pem`, `/ca.der`) with its fingerprint and Name Constraints, a PAC file
/// (`/proxy.pac`) and the setup of each tool from ``ClientSetup``, the generator `larder client`
/// prints from, for each platform it knows. A pure value: the connection supplies the
/// address the client reached and the CA, and sends what ``answer(method:path:)`` returns.
///
/// Nothing secret is on it (no token, no key, no file path); every value written into the
/// HTML or the PAC script is escaped, though none comes from the request.
struct SetupPage: Sendable {
    /// The CA as served: its certificate, its facts and the hosts `tls.intercept` lists.
    struct Authority: Sendable {
        let pem: String
        let der: [UInt8]
        let facts: CertificateFacts
        /// `tls.intercept`.
        let intercepted: [HostRule]
    }

    /// A response to send: status, `Content-Type`, body and further header fields.
    struct Response: Sendable {
        let status: Int
        let contentType: String
        let body: [UInt8]
        var headers: [(String, String)] = []
    }

    /// The page's host name (`proxy.setup_host`).
    let host: String
    /// The proxy as the client reached it, `host:port` (``ProxyAutoConfig/advertised(_:)``).
    let proxyAddress: String
    /// The CA; nil when HTTPS is not intercepted (every CONNECT is a blind tunnel).
    let authority: Authority?

    static let allowed = "GET, HEAD"

    /// The documents whose bodies are rendered from the configuration (the CA downloads are
    /// the mint's bytes as they are).
    enum Document: Hashable, Sendable {
        case html
        case pac
    }

    /// `document`'s body, rendered now.
    func render(_ document: Document) -> [UInt8] {
        switch document {
        case .html: Array(html.utf8)
        case .pac: Array(pac.text.utf8)
        }
    }

    /// What `method` on `path` (query ignored) gets.
    func answer(method: HTTPMethod, path: String) -> Response {
        answer(method: method, path: path, body: render)
    }

    /// What `method` on `path` (query ignored) gets, with the page's and the PAC file's bodies
    /// from `body` (``SetupPageCache`` keeps them rendered).
    func answer(method: HTTPMethod, path: String, body: (Document) -> [UInt8]) -> Response {
        guard method == .get || method == .head else {
            return Self.text(405, "the setup page is read-only: GET or HEAD", headers: [("Allow", Self.allowed)])
        }
        let bare = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? path
        switch bare {
        case "/", "/index.html":
            return Response(
                status: 200, contentType: "text/html; charset=utf-8", body: body(.html),
                headers: [
                    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"), ("X-Content-Type-Options", "nosniff"),
                ])
        case "/ca.pem", "/ca.der":
            guard let authority else {
                return Self.text(
                    404,
                    "this Larder does not intercept HTTPS (tls.intercept is empty): there is no CA to trust, and HTTPS is tunnelled, not cached"
                )
            }
            let pem = bare == "/ca.pem"
            return Response(
                status: 200, contentType: pem ? "application/x-pem-file" : "application/x-x509-ca-cert",
                body: pem ? Array(authority.pem.utf8) : authority.der,
                headers: [
                    ("Content-Disposition", "attachment; filename=\"larder-ca.\(pem ? "pem" : "der")\""),
                    ("X-Content-Type-Options", "nosniff"),
                ])
        case "/proxy.pac":
            return Response(
                status: 200, contentType: ProxyAutoConfig.contentType, body: body(.pac),
                headers: [("X-Content-Type-Options", "nosniff")])
        default:
            return Self.text(404, "no page \(bare) here; try http://\(host)/, /ca.pem, /ca.der or /proxy.pac")
        }
    }

    var pac: ProxyAutoConfig { ProxyAutoConfig(proxy: proxyAddress, setupHost: host) }

    var proxyURL: String { "http://" + proxyAddress }

    var html: String {
        let e = Self.escape
        var page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Larder at \(e(proxyAddress))</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <style>body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
            pre{background:#f4f4f4;padding:.6rem .8rem;overflow-x:auto}code{background:#f4f4f4}
            h2{margin-top:2rem;border-bottom:1px solid #ddd}dt{font-weight:600}</style></head><body>
            <h1>Larder at \(e(proxyAddress))</h1>
            <p>This is Larder, a caching HTTP proxy. Machines that send their HTTP (and HTTPS) requests
            through it share one cache: a package, wheel or file fetched once is served from here
            the next time. This page is answered by Larder itself; it is only reachable through the proxy.</p>
            <h2>Point a machine at this proxy</h2>
            <p>Most command-line tools read these variables (each tool's own setup is below):</p>
            <pre>\(e("export http_proxy=\(proxyURL) https_proxy=\(proxyURL)\nexport HTTP_PROXY=\(proxyURL) HTTPS_PROXY=\(proxyURL)\nexport no_proxy=\(ClientSetup.noProxy) NO_PROXY=\(ClientSetup.noProxy)"))</pre>
            <p>Browsers: set the HTTP and HTTPS proxy to <code>\(e(proxyAddress))</code>, or use the automatic
            configuration file <a href="/proxy.pac">/proxy.pac</a> (http and https through this proxy;
            plain host names, localhost and private addresses direct). Larder's admin listener serves the same file at <code>/proxy.pac</code>.</p>

            """
        page += "<h2>HTTPS</h2>\n"
        if let authority {
            let facts = authority.facts
            let permitted = facts.permittedDNS.map { $0.isEmpty ? "none" : $0.joined(separator: ", ") } ?? "any name (no Name Constraints)"
            page += """
                <p>HTTPS to the hosts below is decrypted and cached, with certificates signed by this Larder's own CA.
                Clients must trust that CA: download it, check its fingerprint against <code>larder ca show</code>
                on the proxy's host, and add it to the machine's store (below).</p>
                <p><a href="/ca.pem">ca.pem</a> (PEM) · <a href="/ca.der">ca.der</a> (DER)</p>
                <dl><dt>SHA-256 fingerprint</dt><dd><code>\(e(facts.sha256Fingerprint))</code></dd>
                <dt>Subject</dt><dd>\(e(facts.subject))</dd><dt>Expires</dt><dd>\(e(facts.notAfter))</dd>
                <dt>May sign for (Name Constraints)</dt><dd>\(e(permitted))</dd>
                <dt>Intercepted hosts (tls.intercept)</dt><dd>\(e(authority.intercepted.map(\.description).joined(separator: ", ")))</dd></dl>
                <p>Other HTTPS is tunnelled unread, and not cached.</p>

                """
        } else {
            page += """
                <p>HTTPS is tunnelled, not cached: this Larder intercepts no host (<code>tls.intercept</code> is empty),
                so there is no CA to trust. Plain HTTP is cached.</p>

                """
        }
        page += toolSections
        return page + "</body></html>\n"
    }

    /// Each tool's setup as `larder client` gives it, for Debian-like systems, then what
    /// differs on RHEL-like ones (the CA store and how the bundle follows it).
    var toolSections: String {
        let e = Self.escape
        let clientAuthority = authority.map {
            ClientSetup.Authority(pem: $0.pem, sha256Fingerprint: $0.facts.sha256Fingerprint, hosts: $0.intercepted)
        }
        let debian = ClientSetup(proxyURL: proxyURL, authority: clientAuthority, platform: .debian)
        let rhel = ClientSetup(proxyURL: proxyURL, authority: clientAuthority, platform: .rhel)
        var out = "<h2>Setup per tool</h2>\n<p>As <code>larder client</code> prints it on the proxy's host"
        out += " (<code>larder client --apply</code> writes the files there). Elsewhere, write each file as shown.</p>\n"
        if clientAuthority != nil {
            for note in debian.notes { out += "<p>\(e(note))</p>\n" }
        }
        func section(_ tool: ClientTool, platform: String) -> String {
            // The text form's first line is the title, shown as the heading.
            let body = tool.text(width: 100).split(separator: "\n", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
            return "<h3 id=\"\(e(tool.name + platform))\">\(e(tool.title))</h3>\n<pre>\(e(body))</pre>\n"
        }
        for tool in debian.tools { out += section(tool, platform: "") }
        let differing = rhel.tools.filter { !debian.tools.contains($0) }
        if !differing.isEmpty {
            out += "<h2>On RHEL, Fedora and their kin</h2>\n<p>These differ there; the rest is the same.</p>\n"
            for tool in differing { out += section(tool, platform: "-rhel") }
        }
        return out
    }

    /// A plain-text answer.
    static func text(_ status: Int, _ message: String, headers: [(String, String)] = []) -> Response {
        // nosniff: a 404 names the path asked for, which must stay text.
        Response(
            status: status, contentType: "text/plain; charset=utf-8", body: Array((message + "\n").utf8),
            headers: headers + [("X-Content-Type-Options", "nosniff")])
    }

    /// `text` as HTML text or a double-quoted attribute value.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }
}

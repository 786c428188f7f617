/// The setup of the shell, the CA store and the tools configured by a file or the environment.
/// Each file Larder writes says so in its first line, and `larder client --undo` removes it.
extension ClientSetup {
    static let writtenBy = "Written by larder client; larder client --undo removes it."

    func environmentTool() -> ClientTool {
        var tool = ClientTool(
            name: "env", title: "Shell environment (curl, wget, Python, Go, uv, most CLIs)",
            explanation:
                "Most tools read the proxy from these variables; NO_PROXY keeps this machine and the private ranges direct. Put them in a shell profile, a CI job's environment or a unit's Environment=."
        )
        tool.environment = proxyVariables
        tool.files = [profile("larder-proxy", tool.environment)]
        tool.notes = [
            "Open a new login shell (or source the file) for the variables to apply; services need them in their own units.",
            "A mirror or package index on the LAN (10.x, 192.168.x...) is then fetched directly, never cached: take its range out of NO_PROXY to cache it.",
        ]
        return tool
    }

    func bundleTool() -> ClientTool? {
        guard let authority else { return nil }
        var tool = ClientTool(
            name: "ca-bundle", title: "Larder's CA and the combined bundle",
            explanation:
                "\(ClientSetup.caFile) is Larder's CA alone, for tools that add CAs to theirs. \(ClientSetup.bundleFile) is the system store's certificates followed by Larder's CA, for tools that take one file in place of their whole trust store; it is rebuilt whenever the system store is."
        )
        tool.files = [
            SetupFile(path: ClientSetup.caFile, content: .text(authority.pem)),
            SetupFile(
                path: ClientSetup.bundleFile, content: .concatenation([platform.systemBundle, ClientSetup.caFile]),
                undo: "rm \(ClientSetup.bundleFile) (never the system's bundle)"),
        ]
        let rebuild =
            "cat \(platform.systemBundle) \(ClientSetup.caFile) > \(ClientSetup.bundleFile).new && mv -f \(ClientSetup.bundleFile).new \(ClientSetup.bundleFile)"
        switch platform.family {
        case .debian:
            // update-ca-certificates(8) runs every hook in /etc/ca-certificates/update.d/ after
            // it rebuilds the store; run-parts takes only names without dots.
            let hook = """
                #!/bin/sh
                # \(ClientSetup.writtenBy)
                # update-ca-certificates runs it after each update: it rebuilds the combined bundle
                # (the system's certificates, then Larder's CA) so it never lags the system store.
                set -e
                [ -r \(ClientSetup.caFile) ] || exit 0
                umask 022
                \(rebuild)

                """
            tool.files.append(SetupFile(path: "/etc/ca-certificates/update.d/larder-bundle", content: .text(hook), mode: 0o755))
        case .rhel:
            // update-ca-trust has no hooks: a path unit watches the extracted store instead.
            let path = """
                # \(ClientSetup.writtenBy)
                [Unit]
                Description=Rebuild Larder's combined CA bundle when the system store changes

                [Path]
                PathChanged=/etc/pki/ca-trust/extracted/pem

                [Install]
                WantedBy=paths.target

                """
            let service = """
                # \(ClientSetup.writtenBy)
                [Unit]
                Description=Rebuild \(ClientSetup.bundleFile) from the system store and Larder's CA

                [Service]
                Type=oneshot
                ExecStart=/bin/sh -c '\(rebuild)'

                """
            tool.files.append(
                SetupFile(
                    path: "/etc/systemd/system/larder-ca-bundle.path", content: .text(path),
                    undo: "systemctl disable --now larder-ca-bundle.path, then rm the unit",
                    // Once its file is gone, systemctl disable still removes the link but says it
                    // failed: the link is removed by hand instead.
                    afterRemoval:
                        "systemctl stop larder-ca-bundle.path; rm -f /etc/systemd/system/paths.target.wants/larder-ca-bundle.path; "
                        + "systemctl daemon-reload"))
            tool.files.append(SetupFile(path: "/etc/systemd/system/larder-ca-bundle.service", content: .text(service)))
            tool.commands = ["systemctl daemon-reload", "systemctl enable --now larder-ca-bundle.path"]
        }
        tool.notes = [
            "Check the CA's fingerprint before trusting it: sha256 \(authority.sha256Fingerprint)."
        ]
        return tool
    }

    func systemStoreTool() -> ClientTool? {
        guard let authority else { return nil }
        let anchor = platform.anchorDirectory + "/" + platform.anchorFile
        var tool = ClientTool(
            name: "system-store", title: "System CA store (\(platform.family == .debian ? "Debian, Ubuntu" : "RHEL, Fedora"))",
            explanation:
                "Adds Larder's CA to the machine's trust store, which apt, curl, wget, git, Go and OpenSSL-based tools read by default. It adds a CA; it replaces nothing. Python's pip (certifi), Node and uv carry their own roots: set them up as shown for each."
        )
        let refresh = platform.family == .debian ? "update-ca-certificates --fresh" : platform.updateCommand
        tool.files = [SetupFile(path: anchor, content: .text(authority.pem), afterRemoval: refresh)]
        tool.commands = [platform.updateCommand]
        return tool
    }

    func aptTool() -> ClientTool {
        var tool = ClientTool(
            name: "apt", title: "apt (Debian, Ubuntu)",
            explanation:
                "apt fetches through the proxy; an https:// source in tls.intercept trusts the combined bundle for that host only (Acquire::https::<host>::CaInfo). The global Acquire::https::CaInfo is not used: it would replace apt's trust for every HTTPS source."
        )
        var lines = ["// \(ClientSetup.writtenBy)", "Acquire::http::Proxy \"\(proxyURL)\";", "Acquire::https::Proxy \"\(proxyURL)\";"]
        if let authority {
            // apt.conf(5) and apt-transport-https(1): per-host options are Acquire::https::<host>::<option>.
            lines += authority.exactHosts.map { "Acquire::https::\($0)::CaInfo \"\(ClientSetup.bundleFile)\";" }
            if !authority.domains.isEmpty {
                tool.notes.append(
                    "apt names hosts one by one: add an Acquire::https::<host>::CaInfo line for each host of \(authority.domains.joined(separator: ", ")) that a source uses."
                )
            }
            tool.requires = ["ca-bundle"]
        }
        tool.files = [SetupFile(path: "/etc/apt/apt.conf.d/80larder-proxy", content: .text(lines.joined(separator: "\n") + "\n"))]
        return tool
    }

    func pipTool() -> ClientTool {
        var tool = ClientTool(
            name: "pip", title: "pip, uv, poetry (Python)",
            explanation:
                "pip reads the proxy and its CA file from its site-wide configuration; uv and poetry (requests) read the variables. Each of them takes one CA file in place of its own roots, so each gets the combined bundle, never Larder's CA alone."
        )
        var config = ["# \(ClientSetup.writtenBy)", "[global]", "proxy = \(proxyURL)"]
        if authority != nil {
            config.append("cert = \(ClientSetup.bundleFile)")
            tool.environment = [
                .init("REQUESTS_CA_BUNDLE", ClientSetup.bundleFile), .init("SSL_CERT_FILE", ClientSetup.bundleFile),
            ]
            tool.files.append(profile("larder-python", tool.environment))
            tool.requires = ["ca-bundle", "env"]
        } else {
            tool.requires = ["env"]
        }
        tool.files.insert(
            SetupFile(path: "/etc/xdg/pip/pip.conf", content: .text(config.joined(separator: "\n") + "\n"), placement: .wholeFile), at: 0)
        tool.notes = [
            "For one user instead: pip config set global.proxy \(proxyURL)"
                + (authority != nil ? "; pip config set global.cert \(ClientSetup.bundleFile)" : "")
        ]
        if authority != nil {
            // requests (pip's HTTP library) takes these from the environment before the session's own CA file.
            tool.notes.append(
                "pip's cert loses to PIP_CERT, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE in the environment: leave them unset or naming the same bundle."
            )
        }
        return tool
    }

    func npmTool() -> ClientTool {
        var tool = ClientTool(
            name: "npm", title: "npm, yarn, pnpm (Node)",
            explanation:
                "npm and pnpm read npm_config_* variables, yarn 2+ reads YARN_*; NODE_EXTRA_CA_CERTS adds Larder's CA to Node's own roots (it replaces nothing)."
        )
        tool.environment = [
            .init("npm_config_proxy", proxyURL), .init("npm_config_https_proxy", proxyURL),
            .init("YARN_HTTP_PROXY", proxyURL), .init("YARN_HTTPS_PROXY", proxyURL),
        ]
        var npmrc = ["proxy=\(proxyURL)", "https-proxy=\(proxyURL)"]
        if authority != nil {
            tool.environment.append(.init("NODE_EXTRA_CA_CERTS", ClientSetup.caFile))
            npmrc.append("cafile=\(ClientSetup.bundleFile)")
            tool.requires = ["ca-bundle"]
        }
        tool.files = [
            profile("larder-node", tool.environment),
            SetupFile(
                path: "~/.npmrc", content: .text(npmrc.joined(separator: "\n") + "\n"), placement: .byHand, undo: "delete these lines"),
        ]
        return tool
    }

    func cargoTool() -> ClientTool {
        var tool = ClientTool(
            name: "cargo", title: "cargo (Rust)",
            explanation:
                "cargo reads CARGO_HTTP_PROXY and CARGO_HTTP_CAINFO, or [http] in its config.toml; its CA file replaces its roots, so it gets the combined bundle."
        )
        tool.environment = [.init("CARGO_HTTP_PROXY", proxyURL)]
        var toml = ["[http]", "proxy = \"\(proxyURL)\""]
        if authority != nil {
            tool.environment.append(.init("CARGO_HTTP_CAINFO", ClientSetup.bundleFile))
            toml.append("cainfo = \"\(ClientSetup.bundleFile)\"")
            tool.requires = ["ca-bundle"]
        }
        tool.files = [
            profile("larder-cargo", tool.environment),
            SetupFile(
                path: "~/.cargo/config.toml", content: .text(toml.joined(separator: "\n") + "\n"), placement: .byHand,
                undo: "delete these lines"),
        ]
        return tool
    }

    func goTool() -> ClientTool {
        var tool = ClientTool(
            name: "go", title: "go (modules)",
            explanation:
                "go reads HTTPS_PROXY (see env) and, on Linux, SSL_CERT_FILE in place of the system store. GOPROXY stays as it is: module downloads go to it through Larder, cached when its host is in tls.intercept."
        )
        if authority != nil {
            tool.environment = [.init("SSL_CERT_FILE", ClientSetup.bundleFile)]
            tool.files = [profile("larder-go", tool.environment)]
            tool.requires = ["ca-bundle", "env"]
        } else {
            tool.requires = ["env"]
        }
        return tool
    }

    func gitTool() -> ClientTool {
        var tool = ClientTool(
            name: "git", title: "git (HTTPS remotes)",
            explanation: "git reads http.proxy and http.sslCAInfo; its CA file replaces the system store, so it gets the combined bundle.")
        var lines = ["# \(ClientSetup.writtenBy)", "[http]", "\tproxy = \(proxyURL)"]
        var commands = ["git config --global http.proxy \(proxyURL)"]
        if authority != nil {
            lines.append("\tsslCAInfo = \(ClientSetup.bundleFile)")
            commands.append("git config --global http.sslCAInfo \(ClientSetup.bundleFile)")
            tool.requires = ["ca-bundle"]
        }
        tool.files = [SetupFile(path: "/etc/gitconfig", content: .text(lines.joined(separator: "\n") + "\n"), placement: .wholeFile)]
        tool.notes = ["For one user instead (or when /etc/gitconfig exists): " + commands.joined(separator: "; ")]
        return tool
    }

    func curlTool() -> ClientTool {
        var tool = ClientTool(
            name: "curl", title: "curl",
            explanation:
                "curl reads the proxy variables (see env) or ~/.curlrc; CURL_CA_BUNDLE and cacert replace its roots, so they name the combined bundle."
        )
        var curlrc = ["proxy = \"\(proxyURL)\""]
        if authority != nil {
            tool.environment = [.init("CURL_CA_BUNDLE", ClientSetup.bundleFile)]
            tool.files = [profile("larder-curl", tool.environment)]
            curlrc.append("cacert = \"\(ClientSetup.bundleFile)\"")
            tool.requires = ["ca-bundle", "env"]
        } else {
            tool.requires = ["env"]
        }
        tool.files.append(
            SetupFile(
                path: "~/.curlrc", content: .text(curlrc.joined(separator: "\n") + "\n"), placement: .byHand, undo: "delete these lines"))
        return tool
    }

    /// The proxy variables, in both cases: curl reads only the lower-case `http_proxy`, Go and
    /// Python either.
    var proxyVariables: [ClientTool.Variable] {
        [
            .init("HTTP_PROXY", proxyURL), .init("HTTPS_PROXY", proxyURL), .init("http_proxy", proxyURL),
            .init("https_proxy", proxyURL), .init("NO_PROXY", ClientSetup.noProxy), .init("no_proxy", ClientSetup.noProxy),
        ]
    }

    /// A `/etc/profile.d/NAME.sh` drop-in exporting `variables`, read by login shells.
    func profile(_ name: String, _ variables: [ClientTool.Variable]) -> SetupFile {
        let lines = ["# \(ClientSetup.writtenBy)"] + variables.map { "export \($0.name)=\(ClientSetup.shellQuoted($0.value))" }
        return SetupFile(path: "/etc/profile.d/\(name).sh", content: .text(lines.joined(separator: "\n") + "\n"))
    }

    /// `value` as one POSIX shell word.
    static func shellQuoted(_ value: String) -> String {
        "'" + value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}

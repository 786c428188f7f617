/// The setup of the container daemons: their proxy through a systemd drop-in (the daemon, not
/// the shell, makes the registry requests) and registry trust per intercepted host.
extension ClientSetup {
    func dockerTool() -> ClientTool {
        var tool = ClientTool(
            name: "docker", title: "Docker daemon",
            explanation:
                "dockerd pulls through the proxy named in its unit's environment. An intercepted registry trusts Larder's CA through /etc/docker/certs.d/<host>/, whose *.crt files Docker adds to the system's roots for that host only."
        )
        tool.files = [serviceDropIn("docker")]
        if let authority {
            tool.files += authority.exactHosts.map {
                SetupFile(path: "/etc/docker/certs.d/\($0)/larder-ca.crt", content: .text(authority.pem))
            }
            tool.notes += domainNote(authority, "certs.d")
        }
        tool.commands = ["systemctl daemon-reload", "systemctl restart docker"]
        tool.notes.append("Docker Hub (docker.io) is served by registry-1.docker.io, its blobs by other hosts: intercept those names.")
        return tool
    }

    func containerdTool() -> ClientTool {
        var tool = ClientTool(
            name: "containerd", title: "containerd (Kubernetes nodes, nerdctl)",
            explanation:
                "containerd pulls through the proxy named in its unit's environment. An intercepted registry gets a hosts.toml in /etc/containerd/certs.d/<host>/ naming Larder's CA, which containerd adds to the system's roots for that registry."
        )
        tool.files = [serviceDropIn("containerd")]
        if let authority {
            for host in authority.exactHosts {
                // containerd's hosts namespace for Docker Hub is docker.io, served by registry-1.docker.io.
                let namespace = host == "registry-1.docker.io" ? "docker.io" : host
                let directory = "/etc/containerd/certs.d/\(namespace)"
                let hosts = """
                    # \(ClientSetup.writtenBy)
                    server = "https://\(host)"

                    [host."https://\(host)"]
                      ca = "\(directory)/larder-ca.crt"

                    """
                tool.files.append(SetupFile(path: directory + "/hosts.toml", content: .text(hosts), placement: .wholeFile))
                tool.files.append(SetupFile(path: directory + "/larder-ca.crt", content: .text(authority.pem)))
            }
            tool.notes += domainNote(authority, "certs.d")
            tool.notes.append(
                "The CRI plugin reads certs.d only with config_path = \"/etc/containerd/certs.d\" under its registry table in /etc/containerd/config.toml (the default from containerd 2.0)."
            )
        }
        tool.commands = ["systemctl daemon-reload", "systemctl restart containerd"]
        return tool
    }

    /// `/etc/systemd/system/UNIT.service.d/larder-proxy.conf`: the proxy variables for a daemon.
    func serviceDropIn(_ unit: String) -> SetupFile {
        // systemd.exec(5): each assignment is one quoted word; % starts a specifier, so it is doubled.
        let assignments = [("HTTP_PROXY", proxyURL), ("HTTPS_PROXY", proxyURL), ("NO_PROXY", ClientSetup.noProxy)].map {
            "\"\($0.0)=\($0.1.split(separator: "%", omittingEmptySubsequences: false).joined(separator: "%%"))\""
        }
        let text = """
            # \(ClientSetup.writtenBy)
            [Service]
            Environment=\(assignments.joined(separator: " "))

            """
        return SetupFile(
            path: "/etc/systemd/system/\(unit).service.d/larder-proxy.conf", content: .text(text),
            afterRemoval: "systemctl daemon-reload && systemctl restart \(unit)")
    }

    func domainNote(_ authority: Authority, _ what: String) -> [String] {
        authority.domains.isEmpty
            ? []
            : [
                "\(what) names registries one by one: repeat the files above for each registry under \(authority.domains.joined(separator: ", "))."
            ]
    }
}

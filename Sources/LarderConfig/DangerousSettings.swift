import LarderIO

/// The settings that let strangers in, which `check-config` and `serve` (at start and after a
/// reload) warn about without refusing them: an operator may mean it, but should know.
/// Only what is dangerous is here; an unusual setting that harms nobody is not.
public enum DangerousSettings {
    /// A warning per danger in `config`, given the addresses the listeners are (or will be)
    /// on: those bound or passed by systemd, which may differ from the file's.
    public static func warnings(_ config: Config, proxyListeners: [SocketAddress], adminListener: SocketAddress?) -> [String] {
        var warnings: [String] = []
        let exposed = proxyListeners.filter { !$0.isLoopback }
        let everyone = config.proxy.allow.filter { $0.prefixLength == 0 }
        if let listener = exposed.first, let rule = everyone.first, config.proxy.authUsers.isEmpty {
            warnings.append(
                "open proxy: proxy listener \(listener) is not on loopback and proxy.allow admits every address (\(rule)) "
                    + "with no proxy.auth_users; anyone who reaches it can use it (and its cache). "
                    + "List your clients' networks in proxy.allow, or set proxy.auth_users")
        }
        if let admin = adminListener, !admin.isLoopback, config.admin.token.isEmpty {
            warnings.append(
                "admin listener \(admin) is not on loopback and has no admin.token: anyone who reaches it can purge, ban, "
                    + "clear and list the cache. Set admin.token_file (systemd: LoadCredential=admin-token:...), "
                    + "or listen on 127.0.0.1")
        }
        return warnings
    }
}

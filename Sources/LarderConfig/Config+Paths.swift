/// The keys that name files and directories, and their resolution against the
/// ``StateDirectory``: after loading, every path in a ``Config`` is absolute, so no part of
/// Larder resolves one against its working directory.
extension Config {
    /// Each key that names a file or directory, with its value here (empty: not set).
    public var paths: [(key: String, path: String)] {
        [
            ("disk.path", disk.path), ("tls.ca_dir", tls.caDirectory), ("tls.upstream_ca_file", tls.upstreamCAFile),
            ("log.access_file", log.accessFile), ("admin.token_file", admin.tokenFile), ("proxy.auth_users_file", proxy.authUsersFile),
        ]
    }

    /// This configuration with every relative path in ``paths`` made absolute against `base`
    /// (an empty one stays empty: not set).
    public func resolvingPaths(against base: StateDirectory) -> Config {
        func resolved(_ path: String) -> String { path.isEmpty ? path : base.resolve(path) }
        var config = self
        config.disk.path = resolved(disk.path)
        config.tls.caDirectory = resolved(tls.caDirectory)
        config.tls.upstreamCAFile = resolved(tls.upstreamCAFile)
        config.log.accessFile = resolved(log.accessFile)
        config.admin.tokenFile = resolved(admin.tokenFile)
        config.proxy.authUsersFile = resolved(proxy.authUsersFile)
        return config
    }
}

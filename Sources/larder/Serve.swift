import ArgumentParser
import Glibc
import LarderConfig
import LarderIO
import LarderServer
import LarderTLS
import Logging

/// `larder serve`: runs the daemon in the foreground until SIGTERM or SIGINT.
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the proxy in the foreground.",
        usage: "larder serve [<options>]",
        discussion: """
            Examples:
              larder serve
              larder serve --listen 127.0.0.1:3128 --listen [::1]:3128 \\
                --admin-listen 127.0.0.1:3129
            SIGHUP reloads the configuration; SIGTERM drains in-flight requests and
            exits 0; SIGUSR1 reopens log.access_file (log rotation); SIGUSR2 is logged
            and otherwise ignored.
            """)

    @Option(
        name: .customLong("config"),
        help: "Configuration file (default: $LARDER_CONFIG, then /etc/larder/larder.toml if present, else embedded defaults).")
    var configPath: String?

    @Option(name: .customLong("listen"), help: "Proxy listen address (repeatable), e.g. 127.0.0.1:3128 or [::1]:3128.")
    var listen: [String] = []

    @Option(name: .customLong("admin-listen"), help: "Admin listen address, e.g. 127.0.0.1:3129.")
    var adminListen: String?

    @Option(name: .customLong("cache-dir"), help: "Disk cache directory.")
    var cacheDir: String?

    @Option(name: .customLong("state-dir"), help: StateDirectoryOption.help)
    var stateDir: String?

    func validate() throws {
        // An empty one (an unset variable in a unit's ExecStart) would be the working directory.
        if cacheDir?.isEmpty == true { throw ValidationError("--cache-dir is empty: name the disk cache's directory") }
    }

    func run() throws {
        let path = configPath ?? ConfigLoader.defaultPath(environment: Environment.variables)
        let selection = ConfigSelection(
            path: path,
            listen: try listen.map { try Serve.address($0, flag: "--listen") },
            adminListen: try adminListen.map { try Serve.address($0, flag: "--admin-listen") },
            cacheDir: cacheDir, stateDirectory: StateDirectory.current(flag: stateDir, configPath: path))
        let config: Config
        switch selection.load() {
        case .success(let loaded):
            config = loaded
        case .failure(let errors):
            printError(errors.description)
            printError("larder: not started: \(errors.errors.count) configuration error\(errors.errors.count == 1 ? "" : "s")")
            throw ExitCode(1)
        }

        let interceptor: TLSInterceptor?
        let createdCA: CertificateFacts?
        do {
            // Made by serve itself, as the service's user, so the unit and a container need no step before it.
            createdCA = try LocalCA.createIfMissing(for: config.tls)
            interceptor = try TLSInterceptor.make(for: config.tls, replacing: nil)
        } catch {
            for problem in error.description.split(separator: "\n") { printError("larder: \(problem)") }
            if error.needsNewCA { printError("larder: \(LocalCA.replaceAdvice(config: path))") }
            printError("larder: not started")
            throw ExitCode(1)
        }

        let threshold = LogThreshold(Logger.Level(rawValue: config.log.level.rawValue) ?? .info)
        LoggingSystem.bootstrap { _ in ConsoleLogHandler(threshold: threshold) }
        let logger = Logger(label: "larder")

        // Signals are taken synchronously on this thread with sigwait; they are blocked before
        // any other thread starts, so every thread inherits the mask. Stray ones are ignored.
        let signals = ProcessSignals.install(handled: [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2])

        let server = Server(config: config, interceptor: interceptor, logger: logger)
        if let problem = server.diskProblem, config.disk.required ?? (Environment.variables["INVOCATION_ID"] != nil) {
            // A daemon that runs but does not cache is worse than one that fails visibly.
            logger.critical(
                "cannot start: \(problem)",
                metadata: ["advice": "make disk.path writable by the service, or set disk.required = false to run memory-only"])
            throw ExitCode(1)
        }
        do {
            try server.start()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        let proxies = server.proxyAddresses.map(\.description).joined(separator: ",")
        logger.info(
            "listening",
            metadata: [
                "proxy": "\(proxies)", "admin": "\(server.adminAddress?.description ?? "off")",
                "config": "\(selection.origin)", "version": "\(Larder.version)", "state": "\(selection.stateDirectory.path)",
                "sockets": "\(server.socketActivated ? "from systemd" : "bound")", "workers": "\(server.workerCount)",
                // Where a new operator finds each client's setup: the page on the proxy port.
                "setup_page": "\(config.proxy.setupHost.isEmpty ? "off" : "http://\(config.proxy.setupHost)/")",
            ])

        warnAboutDangers(server, logger: logger)

        if let createdCA { logCreatedCA(createdCA, directory: config.tls.caDirectory, logger: logger) }
        if let interceptor {
            let facts = interceptor.mint.facts
            logger.info(
                "tls: intercepting CONNECT for \(config.tls.intercept.map(\.description).joined(separator: ", "))",
                metadata: ["ca": "\(facts.sha256Fingerprint)", "expires": "\(facts.notAfter)"])
            if facts.lacksServerOnlyLimits {
                logger.warning("tls: \(LocalCA.rotateForLimits) (\(LocalCA.replaceAdvice(config: path)))")
            }
        }

        while true {
            switch ProcessSignals.wait(signals) {
            case SIGHUP:
                reload(server, selection: selection, threshold: threshold, logger: logger)
            case SIGUSR1:
                // The log-rotation signal of many daemons: log.access_file is opened again (the
                // rest goes to stdout and stderr, the journal under systemd).
                do {
                    if let path = try server.reopenAccessLog() {
                        logger.notice("SIGUSR1: reopened the access log", metadata: ["file": "\(path)"])
                    } else {
                        logger.notice("SIGUSR1: access lines go to stdout; nothing to reopen")
                    }
                } catch {
                    logger.error("SIGUSR1: cannot reopen the access log; still writing to the old file", metadata: ["error": "\(error)"])
                }
            case SIGUSR2:
                logger.notice("SIGUSR2 ignored")
            default:
                logger.notice("shutting down: draining in-flight requests")
                server.shutdown(drainTimeout: server.config.proxy.drainTimeout)
                logger.notice("stopped")
                return
            }
        }
    }

    /// Re-reads the configuration; a bad file keeps the running one. Every key applies but those
    /// ``ConfigKeyTable`` marks restart-only: each one changed is named with its running value,
    /// and the closing line describes what runs after the reload.
    private func reload(_ server: Server, selection: ConfigSelection, threshold: LogThreshold, logger: Logger) {
        guard selection.path != nil else {
            logger.notice("SIGHUP: running on embedded defaults, no file to reload")
            return
        }
        switch selection.load() {
        case .failure(let errors):
            for error in errors.errors {
                logger.error("reload rejected: \(error.headline)")
            }
            logger.error("reload rejected: keeping the running configuration (\(errors.errors.count) errors)")
            server.reloadRejected()
        case .success(let loaded):
            // The CA is read once per reload: its files may change between two reads.
            let interceptor: TLSInterceptor?
            do {
                if let created = try LocalCA.createIfMissing(for: loaded.tls) {
                    logCreatedCA(created, directory: loaded.tls.caDirectory, logger: logger)
                }
                interceptor = try TLSInterceptor.make(for: loaded.tls, replacing: server.interceptor)
            } catch {
                for problem in error.description.split(separator: "\n") { logger.error("reload rejected: \(problem)") }
                if error.needsNewCA {
                    logger.error("reload rejected: \(LocalCA.replaceAdvice(config: selection.path))")
                }
                logger.error("reload rejected: keeping the running configuration")
                server.reloadRejected()
                return
            }
            let running = server.config
            let kept = ConfigKeyTable.restartChanges(from: running, to: loaded)
            for entry in kept {
                logger.warning(
                    "reload: \(entry.name) changed but needs a restart; still running \(Self.running(entry, server))",
                    metadata: ["file": "\(entry.value(in: loaded))"])
            }
            let applied = ConfigKeyTable.keepingRestartOnly(loaded, from: running)
            guard server.apply(applied, interceptor: interceptor) else {
                logger.notice("SIGHUP ignored: the daemon is \(server.life)")
                return
            }
            threshold.level = Logger.Level(rawValue: applied.log.level.rawValue) ?? .info
            var summary = "reloaded \(selection.origin): \(ConfigSummary.line(Self.asRunning(applied, server)))"
            if !kept.isEmpty { summary += "; not applied until a restart: " + kept.map(\.name).joined(separator: ", ") }
            logger.notice("\(summary)")
            warnAboutDangers(server, logger: logger)
        }
    }

    /// Says where the CA made for `tls.intercept` is, and that clients must now trust it.
    private func logCreatedCA(_ facts: CertificateFacts, directory: String, logger: Logger) {
        logger.notice(
            "tls: created the CA in \(directory) for tls.intercept; clients must trust it (larder ca show --dir \(directory))",
            metadata: ["ca": "\(facts.sha256Fingerprint)", "permits": "\(facts.permittedDNS?.joined(separator: ",") ?? "any")"])
    }

    /// `config` with the listen addresses the server has bound (ports chosen, sockets from
    /// systemd), for messages that say what runs.
    private static func asRunning(_ config: Config, _ server: Server) -> Config {
        var running = config
        if !server.proxyAddresses.isEmpty { running.proxy.listen = server.proxyAddresses }
        running.admin.listen = server.adminAddress
        return running
    }

    /// A restart-only key's running value.
    private static func running(_ entry: ConfigKeyEntry, _ server: Server) -> String {
        entry.value(in: asRunning(server.config, server))
    }

    /// Logs each ``DangerousSettings`` warning about the running configuration and listeners.
    private func warnAboutDangers(_ server: Server, logger: Logger) {
        let warnings = DangerousSettings.warnings(
            server.config, proxyListeners: server.proxyAddresses, adminListener: server.adminAddress)
        for warning in warnings { logger.warning("\(warning)") }
    }

    static func address(_ text: String, flag: String) throws -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw ValidationError("\(flag): '\(text)' is not an address like 127.0.0.1:3128 or [::1]:3128")
        }
        return address
    }
}

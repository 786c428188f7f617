import LarderIO

/// Turns a parsed document into a ``Config``, checking every key's name, type and range.
/// Unknown sections and keys are errors with a "did you mean" hint; every error carries the
/// position of the offending key or value.
struct ConfigDecoder {
    let file: String
    let source: [UInt8]
    var errors: [ConfigError] = []
    /// Where `upstream.parent` and `upstream.parents` were set, for the check that only one is.
    private var parentPosition: SourcePosition?
    private var parentsPosition: SourcePosition?
    /// Where `admin.token_file` was set, for the check that `admin.token` is not set too.
    var tokenFilePosition: SourcePosition?
    var tokenPosition: SourcePosition?
    /// What relative paths are resolved against (nil: left as written).
    var stateDirectory: StateDirectory?

    init(file: String, source: [UInt8]) {
        self.file = file
        self.source = source
    }

    /// The keys of each section, in the order config/larder.toml documents them: the keys of
    /// ``ConfigKeyTable``, grouped by section, so the decoder accepts exactly the table's keys.
    static let schema: [(section: String, keys: [String])] = {
        var sections: [(section: String, keys: [String])] = []
        for entry in ConfigKeyTable.entries {
            let section = String(entry.name.prefix { $0 != "." })
            guard section != "route" else { continue }
            let key = String(entry.name.dropFirst(section.count + 1))
            if sections.last?.section == section {
                sections[sections.count - 1].keys.append(key)
            } else {
                sections.append((section, [key]))
            }
        }
        return sections
    }()
    /// The hint for an unknown key: the tables that do have it (a key put under the wrong
    /// header), else the closest key of its own table, else the closest of another table, named
    /// with its table.
    static func keyHint(for key: String, in section: String) -> String {
        let homes = schema.filter { $0.section != section && $0.keys.contains(key) }.map { "[\($0.section)]" }
        if !homes.isEmpty { return " ('\(key)' belongs in \(homes.joined(separator: " or ")))" }
        if routeKeys.contains(key) { return " ('\(key)' belongs in a [[route]] table)" }
        let own = schema.first { $0.section == section }?.keys ?? []
        if let near = Suggestions.closest(to: key, in: own) { return " (did you mean '\(near)'?)" }
        for (other, keys) in schema where other != section {
            if let near = Suggestions.closest(to: key, in: keys) { return " (did you mean '\(near)' in [\(other)]?)" }
        }
        return ""
    }

    /// `[retry]`'s keys, which a `[route.retry]` table takes too.
    static let retryKeys = schema.first { $0.section == "retry" }?.keys ?? []
    /// A `[[route]]` table's keys: the table's `route.` entries.
    static let routeKeys = ConfigKeyTable.entries.filter { $0.name.hasPrefix("route.") }.map { String($0.name.dropFirst("route.".count)) }

    mutating func decode(_ document: ConfigDocument) -> Config {
        var config = Config()
        for entry in document.root.entries {
            fail(
                "key '\(entry.key)' must be inside a section such as [proxy]", at: entry.keyPosition)
        }
        let sectionNames = ConfigDecoder.schema.map(\.section) + ["route"]
        for table in document.tables {
            guard let keys = ConfigDecoder.schema.first(where: { $0.section == table.name })?.keys else {
                fail("unknown section [\(table.name)]\(Suggestions.hint(for: table.name, in: sectionNames))", at: table.position)
                continue
            }
            for entry in table.entries {
                guard keys.contains(entry.key) else {
                    fail(
                        "unknown key '\(entry.key)' in [\(table.name)]\(ConfigDecoder.keyHint(for: entry.key, in: table.name))",
                        at: entry.keyPosition)
                    continue
                }
                apply(section: table.name, key: entry.key, value: entry.value, to: &config)
            }
        }
        for array in document.arrays {
            guard array.name == "route" else {
                fail(
                    "unknown array of tables [[\(array.name)]]\(Suggestions.hint(for: array.name, in: ["route"]))",
                    at: array.elements[0].position)
                continue
            }
            for element in array.elements {
                if let route = decodeRoute(element, defaults: config.retry) { config.routes.append(route) }
            }
        }
        // Presets come after the file's routes, so the operator's win; their routes for named
        // hosts before those for any host (ubuntu.com's pool merges mirrors, which debian's
        // pool route for any host would otherwise shadow); a pattern two presets share (debian
        // and ubuntu have the same layout) is added once.
        let presetRoutes = config.cache.presets.flatMap(\.routes)
        for route in presetRoutes.filter({ !$0.match.anyHost }) + presetRoutes.filter(\.match.anyHost)
        where !config.routes.contains(where: { $0.match == route.match }) {
            config.routes.append(route)
        }
        applyCredentials(&config)
        crossCheck(&config)
        checkObjectLimits(config, in: document)
        return config
    }

    // MARK: Sections

    private mutating func apply(section: String, key: String, value: ConfigValue, to config: inout Config) {
        switch (section, key) {
        case ("proxy", "listen"):
            if let list = stringArray(value, key) {
                let addresses = list.compactMap { item in address(item.text, at: item.position) }
                if addresses.count == list.count {
                    if addresses.isEmpty { fail("proxy.listen needs at least one address", at: value.position) }
                    config.proxy.listen = addresses
                }
            }
        case ("proxy", "allow"):
            if let list = stringArray(value, key) {
                var networks: [CIDR] = []
                for item in list {
                    if let network = CIDR(parsing: item.text) {
                        networks.append(network)
                    } else {
                        fail("'\(item.text)' is not a CIDR like \"10.0.0.0/8\" or \"::1/128\"", at: item.position)
                    }
                }
                if networks.count == list.count { config.proxy.allow = networks }
            }
        case ("proxy", "connect_ports"):
            if let ports = intArray(value, key, range: 1...65535) { config.proxy.connectPorts = ports }
        case ("proxy", "max_connections"):
            if let number = integer(value, key, range: 1...1_000_000) { config.proxy.maxConnections = number }
        case ("proxy", "header_timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.proxy.headerTimeout = duration }
        case ("proxy", "idle_timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.proxy.idleTimeout = duration }
        case ("proxy", "max_header_bytes"):
            if let bytes = size(value, key, range: 1024...(16 << 20)) { config.proxy.maxHeaderBytes = Int(bytes) }
        case ("proxy", "workers"):
            // No event loop serves nothing: 0 is refused, with "auto" as the fix.
            if case .string("auto") = value.kind {
                config.proxy.workers = nil
            } else if case .integer(0) = value.kind {
                fail("'workers' must be at least 1, got 0; write \"auto\" for one event loop per usable CPU", at: value.position)
            } else if case .integer(let number) = value.kind, (1...256).contains(number) {
                config.proxy.workers = number
            } else {
                fail("expected \"auto\" or a number of event loops from 1 to 256 for '\(key)', got \(value.summary)", at: value.position)
            }
        case ("proxy", "busy_poll"):
            // Beyond a few milliseconds polling only burns CPU: no wake-up costs that much.
            if let duration = duration(value, key, minimum: .zero, maximum: .milliseconds(10)) { config.proxy.busyPoll = duration }
        case ("proxy", "drain_timeout"):
            if let duration = duration(value, key, minimum: .zero) { config.proxy.drainTimeout = duration }
        case ("proxy", "tunnel_idle_timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.proxy.tunnelIdleTimeout = duration }
        case ("proxy", "auth_users"):
            if let list = stringArray(value, key) {
                var users: [ProxyUser] = []
                for item in list {
                    if let user = proxyUser(item.text, at: item.position, seen: users) { users.append(user) }
                }
                if users.count == list.count { config.proxy.authUsers = users }
            }
        case ("proxy", "auth_users_file"):
            if let text = string(value, key), !text.isEmpty { readUsersFile(text, at: value.position, into: &config) }
        case ("proxy", "request_body_buffer"):
            if let bytes = size(value, key, range: 0...(64 << 20)) { config.proxy.requestBodyBuffer = Int(bytes) }
        case ("proxy", "allow_local_destinations"):
            if case .string("auto") = value.kind {
                config.proxy.allowLocalDestinations = nil
            } else if case .boolean(let flag) = value.kind {
                config.proxy.allowLocalDestinations = flag
            } else {
                fail("expected true, false or \"auto\" for '\(key)', got \(value.summary)", at: value.position)
            }
        case ("proxy", "deny_destinations"):
            if let rules = hostRules(value, key) { config.proxy.denyDestinations = rules }
        case ("proxy", "allow_destinations"):
            if let rules = hostRules(value, key) { config.proxy.allowDestinations = rules }
        case ("proxy", "auth_realm"):
            if let text = string(value, key) {
                // The realm is sent as a quoted-string (RFC 9110 §11.6.1).
                if text.isEmpty || text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0x22 || $0 == 0x5C }) {
                    fail("auth_realm must be non-empty printable text without quotes or backslashes", at: value.position)
                } else {
                    config.proxy.authRealm = text
                }
            }
        case ("proxy", "setup_host"):
            if let text = string(value, key) {
                // A DNS name only: it is compared with request hosts and written into the page.
                if text.isEmpty {
                    config.proxy.setupHost = ""
                } else if let rule = HostRule(parsing: text), case .host(let name) = rule, rule.isName {
                    config.proxy.setupHost = name
                } else {
                    fail("setup_host must be a host name such as \"larder.setup\", or \"\" to turn the page off", at: value.position)
                }
            }

        case ("admin", "listen"):
            if let text = string(value, key) {
                if text.isEmpty {
                    config.admin.listen = nil
                } else if let parsed = address(text, at: value.position) {
                    config.admin.listen = parsed
                }
            }
        case ("tls", "intercept"):
            if let rules = hostRules(value, key, namesOnly: true) { config.tls.intercept = rules }
        case ("tls", "never"):
            if let rules = hostRules(value, key, namesOnly: true) { config.tls.never = rules }
        case ("tls", "ca_dir"):
            if let text = string(value, key) {
                if text.isEmpty { fail("tls.ca_dir must not be empty", at: value.position) } else { config.tls.caDirectory = text }
            }
        case ("tls", "leaf_validity"):
            // Browsers refuse leaves valid for more than 398 days; an hour keeps clock skew harmless.
            if let duration = duration(value, key, minimum: .seconds(3600), maximum: .seconds(398 * 86_400)) {
                config.tls.leafValidity = duration
            }
        case ("tls", "upstream_ca_file"):
            if let text = string(value, key) { config.tls.upstreamCAFile = text }
        case ("tls", "splice_after_failures"):
            if let number = integer(value, key, range: 1...1000) { config.tls.spliceAfterFailures = number }
        case ("tls", "splice_for"):
            if let duration = duration(value, key, minimum: .seconds(1)) { config.tls.spliceFor = duration }

        case ("admin", "token"):
            // An empty token is no token: the shipped file says `token = ""`, and the systemd
            // credential must still apply then.
            if let text = string(value, key), !text.isEmpty {
                tokenPosition = value.position
                config.admin.token = text
            }
        case ("admin", "token_file"):
            if let text = string(value, key), !text.isEmpty { readTokenFile(text, at: value.position, into: &config) }
        case ("admin", "allow_hosts"):
            if let list = stringArray(value, key) {
                for item in list where item.text.isEmpty || item.text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F || $0 == 0x2F }) {
                    fail(
                        "allow_hosts lists names as Host carries them (\"larder.internal\" or \"larder.internal:3129\"), got \"\(item.text)\"",
                        at: item.position)
                }
                config.admin.allowHosts = list.map { $0.text.lowercased() }
            }

        case ("memory", "max_bytes"):
            if let bytes = size(value, key, range: 0...(1 << 50)) { config.memory.maxBytes = Int(bytes) }
        case ("memory", "max_entries"):
            if let number = integer(value, key, range: 0...100_000_000) { config.memory.maxEntries = number }
        case ("memory", "max_object_bytes"):
            if let bytes = size(value, key, range: 0...(1 << 40)) { config.memory.maxObjectBytes = Int(bytes) }

        case ("disk", "path"):
            if let text = string(value, key) {
                if text.isEmpty { fail("disk.path must not be empty", at: value.position) } else { config.disk.path = text }
            }
        case ("disk", "max_bytes"):
            // A tier too small for one segment file holds nothing.
            if let bytes = size(value, key, range: (1 << 20)...(1 << 56)) { config.disk.maxBytes = bytes }
        case ("disk", "max_object_bytes"):
            if let bytes = size(value, key, range: 0...(1 << 50)) { config.disk.maxObjectBytes = bytes }
        case ("disk", "scrub_rate"):
            if let bytes = size(value, key, range: 0...(1 << 40)) { config.disk.scrubRate = bytes }
        case ("disk", "required"):
            switch value.kind {
            case .boolean(let flag): config.disk.required = flag
            case .string("auto"): config.disk.required = nil
            default: fail("expected true, false or \"auto\" for 'required', got \(value.summary)", at: value.position)
            }

        case ("upstream", "connect_timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.upstream.connectTimeout = duration }
        case ("upstream", "min_rate"):
            if let bytes = size(value, key, range: 0...(1 << 40)) { config.upstream.minRate = Int(bytes) }
        case ("upstream", "timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.upstream.timeout = duration }
        case ("upstream", "parent"):
            if let text = string(value, key) {
                if text.isEmpty || ConfigDecoder.isProxyURL(text) {
                    config.upstream.parent = text
                    parentPosition = value.position
                } else {
                    fail("parent must be a proxy URL like \"http://proxy.example:3128\", got \"\(text)\"", at: value.position)
                }
            }
        case ("upstream", "parents"):
            if let list = stringArray(value, key) {
                var parents: [String] = []
                for item in list {
                    if !ConfigDecoder.isProxyURL(item.text) {
                        fail("a parent must be a proxy URL like \"http://proxy.example:3128\", got \"\(item.text)\"", at: item.position)
                    } else if parents.contains(item.text) {
                        fail("parent \"\(item.text)\" is listed twice", at: item.position)
                    } else {
                        parents.append(item.text)
                    }
                }
                if parents.count == list.count {
                    config.upstream.parents = parents
                    parentsPosition = value.position
                }
            }
        case ("upstream", "parent_selection"):
            if let selection = choice(value, key, ParentSelection.self) { config.upstream.parentSelection = selection }
        case ("upstream", "parent_backoff"):
            if let duration = duration(value, key, minimum: .zero) { config.upstream.parentBackoff = duration }
        case ("upstream", "direct"):
            if let rules = hostRules(value, key) { config.upstream.direct = rules }
        case ("upstream", "max_connections_per_host"):
            if let number = integer(value, key, range: 1...10_000) { config.upstream.maxConnectionsPerHost = number }
        case ("upstream", "resolve"):
            if let list = stringArray(value, key) {
                var entries: [ResolveEntry] = []
                for item in list {
                    switch ResolveEntry.parse(item.text) {
                    case .success(let entry) where entries.contains { $0.host == entry.host && $0.port == entry.port }:
                        fail("\(entry.host):\(entry.port) is pinned twice in upstream.resolve", at: item.position)
                    case .success(let entry):
                        entries.append(entry)
                    case .failure(let invalid):
                        fail(
                            "upstream.resolve entries are \"host:port:address[,address]\" (\"deb.debian.org:80:192.0.2.7\"); "
                                + "\"\(item.text)\": \(invalid.reason)", at: item.position)
                    }
                }
                config.upstream.resolve = entries
            }

        case ("retry", _):
            applyRetry(key: key, value: value, to: &config.retry)

        case ("cache", "default_policy"):
            if let policy = choice(value, key, CachePolicy.self) { config.cache.defaultPolicy = policy }
        case ("cache", "stale_if_error"):
            if let duration = duration(value, key, minimum: .zero) { config.cache.staleIfError = duration }
        case ("cache", "negative_ttl"):
            if let duration = duration(value, key, minimum: .zero) { config.cache.negativeTTL = duration }
        case ("cache", "presets"):
            if let list = stringArray(value, key) {
                var presets: [Preset] = []
                for item in list {
                    guard let preset = Preset(rawValue: item.text) else {
                        fail(
                            "unknown preset \"\(item.text)\"\(Suggestions.hint(for: item.text, in: Preset.allCases.map(\.rawValue))); "
                                + "presets are " + Preset.allCases.map(\.rawValue).joined(separator: ", "),
                            at: item.position)
                        continue
                    }
                    if !presets.contains(preset) { presets.append(preset) }
                }
                config.cache.presets = presets
            }
        case ("cache", "offline"):
            if let flag = boolean(value, key) { config.cache.offline = flag }
        case ("cache", "admission"):
            if let policy = choice(value, key, AdmissionPolicy.self) { config.cache.admission = policy }
        case ("cache", "admission_min_bytes"):
            if let bytes = size(value, key, range: 0...(1 << 50)) { config.cache.admissionMinBytes = Int(bytes) }
        case ("cache", "range_whole_max"):
            if let bytes = size(value, key, range: 0...(1 << 50)) { config.cache.rangeWholeMax = Int(bytes) }
        case ("cache", "slice_size"):
            // 0 turns slicing off; below 64 KiB the per-slice entries and requests cost more
            // than they save.
            if case .string("0") = value.kind {
                config.cache.sliceSize = 0
            } else if let bytes = size(value, key, range: 0...(1 << 32)) {
                if bytes != 0 && bytes < 64 << 10 {
                    fail("'\(key)' must be \"0\" (off) or at least 64KiB, got \(value.summary)", at: value.position)
                } else {
                    config.cache.sliceSize = Int(bytes)
                }
            }

        case ("coalesce", "max_waiters"):
            if let number = integer(value, key, range: 1...1_000_000) { config.coalesce.maxWaiters = number }
        case ("coalesce", "wait_timeout"):
            if let duration = duration(value, key, minimum: .milliseconds(1)) { config.coalesce.waitTimeout = duration }
        case ("coalesce", "finish_abandoned_max"):
            if let bytes = size(value, key, range: 0...(1 << 50)) { config.coalesce.finishAbandonedMax = Int(bytes) }
        case ("coalesce", "not_shareable_ttl"):
            if let duration = duration(value, key, minimum: .zero) { config.coalesce.notShareableTTL = duration }

        case ("log", "level"):
            if let level = choice(value, key, LogConfig.Level.self) { config.log.level = level }
        case ("log", "access"):
            if let flag = boolean(value, key) { config.log.access = flag }
        case ("log", "access_file"):
            if let text = string(value, key) { config.log.accessFile = text }
        case ("log", "access_format"):
            if let format = choice(value, key, LogConfig.AccessFormat.self) { config.log.accessFormat = format }
        case ("log", "admin_requests"):
            if let flag = boolean(value, key) { config.log.adminRequests = flag }
        case ("log", "redact_query"):
            if let list = stringArray(value, key) {
                for item in list where item.text.isEmpty || item.text.contains(where: { "&=?# ".contains($0) }) {
                    fail("redact_query lists query parameter names (globs like \"X-Amz-*\"), got \"\(item.text)\"", at: item.position)
                }
                config.log.redactQuery = QueryRedaction(names: list.map(\.text))
            }

        default:
            fail("key '\(key)' is not handled in [\(section)]", at: value.position)
        }
    }

    mutating func applyRetry(key: String, value: ConfigValue, to retry: inout RetryConfig) {
        switch key {
        case "strategy":
            if let strategy = choice(value, key, RetryConfig.Strategy.self) { retry.strategy = strategy }
        case "max_attempts":
            if let number = integer(value, key, range: 0...100) { retry.maxAttempts = number }
        case "base_delay":
            if let duration = duration(value, key, minimum: .zero) { retry.baseDelay = duration }
        case "multiplier":
            switch value.kind {
            case .float(let number) where number >= 1 && number <= 100: retry.multiplier = number
            case .integer(let number) where number >= 1 && number <= 100: retry.multiplier = Double(number)
            case .float, .integer: fail("multiplier must be between 1.0 and 100, got \(value.summary)", at: value.position)
            default: fail("expected a number like 2.0 for 'multiplier', got \(value.summary)", at: value.position)
            }
        case "max_delay":
            if let duration = duration(value, key, minimum: .zero) { retry.maxDelay = duration }
        case "jitter":
            if let duration = duration(value, key, minimum: .zero) { retry.jitter = duration }
        case "budget_ratio":
            switch value.kind {
            case .float(let number) where number >= 0 && number <= 10: retry.budgetRatio = number
            case .integer(let number) where number >= 0 && number <= 10: retry.budgetRatio = Double(number)
            default: fail("expected a ratio between 0.0 and 10.0 for 'budget_ratio', got \(value.summary)", at: value.position)
            }
        case "budget_min":
            if let number = integer(value, key, range: 0...1_000_000) { retry.budgetMin = number }
        case "retry_on":
            if let list = stringArray(value, key) {
                var conditions: Set<RetryConfig.Condition> = []
                for item in list {
                    if let condition = RetryConfig.Condition(rawValue: item.text) {
                        conditions.insert(condition)
                    } else {
                        let names = RetryConfig.Condition.allCases.map(\.rawValue)
                        fail(
                            "unknown retry condition \"\(item.text)\" (one of \(names.joined(separator: ", ")))"
                                + Suggestions.hint(for: item.text, in: names), at: item.position)
                    }
                }
                retry.retryOn = conditions
            }
        default:
            break
        }
    }

    /// Checks that need more than one key.
    private mutating func crossCheck(_ config: inout Config) {
        if !config.upstream.parent.isEmpty && !config.upstream.parents.isEmpty, let position = parentsPosition ?? parentPosition {
            fail("set either upstream.parent (one parent) or upstream.parents (several), not both", at: position)
        }
        if let tokenFilePosition, tokenPosition != nil {
            fail("set either admin.token or admin.token_file, not both", at: tokenFilePosition)
        }
        if config.retry.baseDelay > config.retry.maxDelay {
            // Reported without a position of its own: point at the [retry] table's first key.
            config.retry.baseDelay = config.retry.maxDelay
        }
    }

    // MARK: Typed readers

    mutating func string(_ value: ConfigValue, _ key: String) -> String? {
        if case .string(let text) = value.kind { return text }
        fail("expected a string for '\(key)', got \(value.summary)", at: value.position)
        return nil
    }

    /// A list of host names, `*.` domain patterns and CIDRs; with `namesOnly` (for
    /// certificates, which Larder mints for names only) no addresses. nil (after an error per
    /// bad item) unless every item parses.
    mutating func hostRules(_ value: ConfigValue, _ key: String, namesOnly: Bool = false) -> [HostRule]? {
        guard let list = stringArray(value, key) else { return nil }
        var rules: [HostRule] = []
        for item in list {
            if let rule = HostRule(parsing: item.text), !namesOnly || rule.isName {
                rules.append(rule)
            } else if namesOnly {
                fail(
                    "'\(item.text)' is not a host name (\"registry.example.org\") or a domain pattern (\"*.example.net\")",
                    at: item.position)
            } else {
                fail(
                    "'\(item.text)' is not a host (\"localhost\"), a domain pattern (\"*.internal\") or a CIDR (\"10.0.0.0/8\")",
                    at: item.position)
            }
        }
        return rules.count == list.count ? rules : nil
    }

    mutating func boolean(_ value: ConfigValue, _ key: String) -> Bool? {
        if case .boolean(let flag) = value.kind { return flag }
        fail("expected true or false for '\(key)', got \(value.summary)", at: value.position)
        return nil
    }

    mutating func integer(_ value: ConfigValue, _ key: String, range: ClosedRange<Int>) -> Int? {
        guard case .integer(let number) = value.kind else {
            fail("expected an integer for '\(key)', got \(value.summary)", at: value.position)
            return nil
        }
        guard range.contains(number) else {
            fail("'\(key)' must be between \(range.lowerBound) and \(range.upperBound), got \(number)", at: value.position)
            return nil
        }
        return number
    }

    mutating func duration(_ value: ConfigValue, _ key: String, minimum: Duration, maximum: Duration? = nil) -> Duration? {
        guard case .string(let text) = value.kind else {
            fail("expected a duration like \"5s\" for '\(key)', got \(value.summary)", at: value.position)
            return nil
        }
        guard let duration = Units.duration(text) else {
            fail("expected a duration like \"250ms\", \"5s\", \"10m\", \"2h\" or \"7d\" for '\(key)', got \"\(text)\"", at: value.position)
            return nil
        }
        guard duration >= minimum else {
            fail("'\(key)' must be at least \(Units.format(minimum)), got \"\(text)\"", at: value.position)
            return nil
        }
        if let maximum, duration > maximum {
            fail("'\(key)' must be at most \(Units.format(maximum)), got \"\(text)\"", at: value.position)
            return nil
        }
        return duration
    }

    mutating func size(_ value: ConfigValue, _ key: String, range: ClosedRange<Int64>) -> Int64? {
        guard case .string(let text) = value.kind else {
            fail("expected a size like \"256MiB\" for '\(key)', got \(value.summary)", at: value.position)
            return nil
        }
        guard let bytes = Units.size(text) else {
            fail("expected a size like \"512KiB\", \"256MiB\" or \"10GiB\" for '\(key)', got \"\(text)\"", at: value.position)
            return nil
        }
        guard range.contains(bytes) else {
            fail(
                "'\(key)' must be between \(Units.format(bytes: range.lowerBound)) and \(Units.format(bytes: range.upperBound)), got \"\(text)\"",
                at: value.position)
            return nil
        }
        return bytes
    }

    mutating func choice<Choice: RawRepresentable & CaseIterable>(
        _ value: ConfigValue, _ key: String, _ type: Choice.Type
    ) -> Choice? where Choice.RawValue == String {
        guard let text = string(value, key) else { return nil }
        if let parsed = Choice(rawValue: text) { return parsed }
        let names = Choice.allCases.map(\.rawValue)
        // One parenthesis: the suggestion first, then the choices.
        let suggestion = Suggestions.closest(to: text, in: names).map { "did you mean '\($0)'? " } ?? ""
        fail("unknown \(key) \"\(text)\" (\(suggestion)one of \(names.joined(separator: ", ")))", at: value.position)
        return nil
    }

    mutating func stringArray(_ value: ConfigValue, _ key: String) -> [(text: String, position: SourcePosition)]? {
        guard case .array(let elements) = value.kind else {
            fail("expected an array of strings for '\(key)', got \(value.summary)", at: value.position)
            return nil
        }
        var result: [(String, SourcePosition)] = []
        for element in elements {
            guard case .string(let text) = element.kind else {
                fail("expected a string in '\(key)', got \(element.summary)", at: element.position)
                return nil
            }
            result.append((text, element.position))
        }
        return result
    }

    mutating func intArray(_ value: ConfigValue, _ key: String, range: ClosedRange<Int>) -> [Int]? {
        guard case .array(let elements) = value.kind else {
            fail("expected an array of integers for '\(key)', got \(value.summary)", at: value.position)
            return nil
        }
        var result: [Int] = []
        for element in elements {
            guard let number = integer(element, key, range: range) else { return nil }
            result.append(number)
        }
        return result
    }

    mutating func address(_ text: String, at position: SourcePosition) -> SocketAddress? {
        if let address = SocketAddress(parsing: text) { return address }
        fail("'\(text)' is not a listen address like \"127.0.0.1:3128\" or \"[::1]:3128\"", at: position)
        return nil
    }

    static func isProxyURL(_ text: String) -> Bool {
        guard let schemeEnd = text.firstIndex(of: ":"), text[schemeEnd...].hasPrefix("://") else { return false }
        let scheme = text[..<schemeEnd].lowercased()
        let rest = text[text.index(schemeEnd, offsetBy: 3)...]
        return ["http", "https", "socks5", "socks5h"].contains(scheme) && !rest.isEmpty && !rest.contains(" ")
    }

    mutating func fail(_ message: String, at position: SourcePosition) {
        errors.append(ConfigError(file: file, bytePosition: position, message: message, source: source))
    }
}

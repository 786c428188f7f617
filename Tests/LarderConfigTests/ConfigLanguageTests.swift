import LarderConfig
import Testing

/// The errors `text` gives, none when it parses (shared by this target's config suites).
func errors(_ text: String) -> [ConfigError] {
    switch ConfigLoader.parse(text, file: "t.toml") {
    case .success: []
    case .failure(let failure): failure.errors
    }
}

/// The configuration `text` gives; throws its errors.
func config(_ text: String) throws -> Config {
    try ConfigLoader.parse(text, file: "t.toml").get()
}

/// One error expected at a line and column, with a fragment of its message.
private struct ErrorCase: CustomTestStringConvertible, Sendable {
    let name: String
    let text: String
    let line: Int
    let column: Int
    let message: String
    var testDescription: String { name }
}

private let errorCases: [ErrorCase] = [
    ErrorCase(
        name: "key leaves out part of a mutable route's URL",
        text: "[[route]]\nmatch = \"http://*/debian/*\"\nkey = \"debian:{path}\"\n", line: 3, column: 1,
        message: "allowed only with immutable = true"),
    ErrorCase(
        name: "ignore_query on a mutable route", text: "[[route]]\nmatch = \"http://a/*\"\nignore_query = [\"sig\"]\n", line: 3,
        column: 1, message: "leaves out part of the URL"),
    ErrorCase(
        name: "unknown key placeholder", text: "[[route]]\nmatch = \"http://a/*\"\nimmutable = true\nkey = \"a:{file}\"\n", line: 4,
        column: 10, message: "unknown placeholder {file}"),
    ErrorCase(
        name: "key names a capture the match lacks",
        text: "[[route]]\nmatch = \"http://a/{dir}/*\"\nimmutable = true\nkey = \"a:{file}\"\n", line: 4, column: 10,
        message: "the match's captures ({dir})"),
    ErrorCase(
        name: "capture named like a placeholder", text: "[[route]]\nmatch = \"http://a/{path}\"\n", line: 2, column: 19,
        message: "not a key placeholder"),
    ErrorCase(
        name: "key with the slice marker's '#'",
        text: "[[route]]\nmatch = \"http://a/*\"\nimmutable = true\nkey = \"a:{path}#slice=0\"\n", line: 4, column: 16,
        message: "may not contain '#'"),
    ErrorCase(
        name: "key with {query} after other text than '?'",
        text: "[[route]]\nmatch = \"http://a/*\"\nimmutable = true\nkey = \"q:{path}:{query}\"\n", line: 4, column: 17,
        message: "{query} only right after a '?'"),
    ErrorCase(
        name: "key starting with {query}",
        text: "[[route]]\nmatch = \"http://a/*\"\nimmutable = true\nkey = \"{query}{path}\"\n", line: 4, column: 8,
        message: "{query} only right after a '?'"),
    ErrorCase(
        name: "disk.required neither boolean nor auto", text: "[disk]\nrequired = \"yes\"\n", line: 2, column: 12,
        message: "expected true, false or \"auto\""),
    ErrorCase(
        name: "key without a placeholder", text: "[[route]]\nmatch = \"http://a/*\"\nimmutable = true\nkey = \"a\"\n", line: 4,
        column: 8, message: "needs at least one placeholder"),
    ErrorCase(
        name: "key without {host} on a wildcard-host route has the fix in the message",
        text: "[[route]]\nmatch = \"http://*/{base}/pool/{file}\"\nimmutable = true\nkey = \"debian:{file}\"\n", line: 4, column: 7,
        message: "leaves out {host} on a route whose match allows several hosts"),
    ErrorCase(
        name: "key without {host} on a host-glob route",
        text: "[[route]]\nmatch = \"http://*.debian.org/*\"\nimmutable = true\nkey = \"debian:{path}\"\n", line: 4, column: 7,
        message: "Add {host} to the key, or name the host in match"),
    ErrorCase(
        name: "digest route without a {digest} capture",
        text: "[[route]]\nmatch = \"http://*/by-hash/SHA256/*\"\ndigest = \"sha256\"\n", line: 3, column: 10,
        message: "needs a {digest} capture"),
    ErrorCase(
        name: "digest route whose key drops the digest",
        text: "[[route]]\nmatch = \"http://*/{dir}/{digest}\"\ndigest = \"sha512\"\nkey = \"x:{dir}\"\n", line: 4, column: 7,
        message: "must contain {digest}"),
    ErrorCase(
        name: "digest algorithm that does not pin a body", text: "[[route]]\nmatch = \"http://*/{digest}\"\ndigest = \"md5\"\n",
        line: 3, column: 10, message: "unknown digest \"md5\" (one of sha256, sha512)"),
    ErrorCase(
        name: "resolve entry that is not host:port:address", text: "[upstream]\nresolve = [\"a.example:80:a.example\"]\n", line: 2,
        column: 12, message: "is not an IP address"),
    ErrorCase(name: "missing equals", text: "[proxy]\nlisten [\"a\"]\n", line: 2, column: 8, message: "expected '='"),
    ErrorCase(name: "unterminated string", text: "[disk]\npath = \"abc\n", line: 2, column: 8, message: "unterminated string"),
    ErrorCase(name: "unterminated array", text: "[proxy]\nconnect_ports = [1, 2\n", line: 2, column: 17, message: "unterminated array"),
    ErrorCase(name: "junk after value", text: "[proxy]\nworkers = 1 2\n", line: 2, column: 13, message: "unexpected text"),
    ErrorCase(name: "unquoted string", text: "[log]\nlevel = info\n", line: 2, column: 9, message: "strings need quotes"),
    ErrorCase(name: "unclosed header", text: "[proxy\n", line: 1, column: 7, message: "expected ']'"),
    ErrorCase(name: "bad escape", text: "[disk]\npath = \"a\\qb\"\n", line: 2, column: 10, message: "unknown escape"),
    ErrorCase(name: "inline table", text: "[proxy]\nx = {a = 1}\n", line: 2, column: 5, message: "inline tables"),
    ErrorCase(
        name: "duplicate key", text: "[proxy]\nworkers = 1\nworkers = 2\n", line: 3, column: 1,
        message: "duplicate key 'workers' (first defined at line 2)"),
    ErrorCase(name: "duplicate table", text: "[proxy]\n[memory]\n[proxy]\n", line: 3, column: 1, message: "duplicate table [proxy]"),
    ErrorCase(
        name: "duration given as integer", text: "[proxy]\nheader_timeout = 5\n", line: 2, column: 18,
        message: "expected a duration like \"5s\" for 'header_timeout', got 5"),
    ErrorCase(
        name: "duration with bad unit", text: "[proxy]\nidle_timeout = \"5 minutes\"\n", line: 2, column: 16, message: "expected a duration"
    ),
    ErrorCase(name: "size with bad unit", text: "[memory]\nmax_bytes = \"12 apples\"\n", line: 2, column: 13, message: "expected a size"),
    ErrorCase(name: "string for integer", text: "[proxy]\nmax_connections = \"10\"\n", line: 2, column: 19, message: "expected an integer"),
    ErrorCase(name: "out of range", text: "[proxy]\nmax_connections = 0\n", line: 2, column: 19, message: "must be between 1 and 1000000"),
    ErrorCase(name: "size out of range", text: "[proxy]\nmax_header_bytes = \"10B\"\n", line: 2, column: 20, message: "must be between"),
    ErrorCase(name: "unknown section", text: "[retyr]\n", line: 1, column: 1, message: "unknown section [retyr] (did you mean 'retry'?)"),
    ErrorCase(
        name: "unknown key", text: "[proxy]\nmax_conections = 5\n", line: 2, column: 1,
        message: "unknown key 'max_conections' in [proxy] (did you mean 'max_connections'?)"),
    ErrorCase(
        name: "key under another section", text: "[upstream]\ntimeout = \"5s\"\nmax_conections = 5\n", line: 3, column: 1,
        message: "unknown key 'max_conections' in [upstream] (did you mean 'max_connections' in [proxy]?)"),
    ErrorCase(
        name: "unknown key without suggestion", text: "[cache]\nzzzzzzzz = 1\n", line: 2, column: 1,
        message: "unknown key 'zzzzzzzz' in [cache]"),
    ErrorCase(name: "key outside a section", text: "workers = 1\n", line: 1, column: 1, message: "must be inside a section"),
    ErrorCase(
        name: "bad listen address", text: "[proxy]\nlisten = [\"127.0.0.1\"]\n", line: 2, column: 11, message: "not a listen address"),
    ErrorCase(
        name: "bad admin address", text: "[admin]\nlisten = \"localhost:99999\"\n", line: 2, column: 10, message: "not a listen address"),
    ErrorCase(name: "bad CIDR", text: "[proxy]\nallow = [\"10.0.0.0/33\"]\n", line: 2, column: 10, message: "not a CIDR"),
    ErrorCase(
        name: "allow_local_destinations takes true, false or auto", text: "[proxy]\nallow_local_destinations = \"maybe\"\n", line: 2,
        column: 28, message: "expected true, false or \"auto\" for 'allow_local_destinations'"),
    ErrorCase(
        name: "a destination rule that is no host, domain or CIDR", text: "[proxy]\ndeny_destinations = [\"10.0.0.0/33\"]\n", line: 2,
        column: 22, message: "'10.0.0.0/33' is not a host"),
    ErrorCase(name: "scrub_rate is a size", text: "[disk]\nscrub_rate = 5\n", line: 2, column: 14, message: "expected a size"),
    ErrorCase(name: "min_rate is a size", text: "[upstream]\nmin_rate = \"fast\"\n", line: 2, column: 12, message: "expected a size"),
    ErrorCase(
        name: "request_body_buffer is bounded", text: "[proxy]\nrequest_body_buffer = \"1GiB\"\n", line: 2, column: 23,
        message: "request_body_buffer"),
    ErrorCase(
        name: "unknown policy", text: "[cache]\ndefault_policy = \"cache-first\"\n", line: 2, column: 18,
        message: "unknown default_policy \"cache-first\" (did you mean 'cache_first'? one of http, "),
    ErrorCase(
        name: "unknown retry condition", text: "[retry]\nretry_on = [\"5xx\", \"timout\"]\n", line: 2, column: 20,
        message: "unknown retry condition \"timout\""),
    ErrorCase(name: "route without match", text: "[[route]]\npolicy = \"http\"\n", line: 1, column: 1, message: "needs a 'match'"),
    ErrorCase(
        name: "malformed route match", text: "[[route]]\nmatch = \"http//x/\"\n", line: 2, column: 10, message: "invalid route match"),
    ErrorCase(name: "route match bad scheme", text: "[[route]]\nmatch = \"ftp://x/\"\n", line: 2, column: 10, message: "scheme must be"),
    ErrorCase(name: "route match bad port", text: "[[route]]\nmatch = \"http://x:99999/\"\n", line: 2, column: 19, message: "invalid port"),
    ErrorCase(
        name: "route unknown key", text: "[[route]]\nmatch = \"http://x/*\"\npolcy = \"http\"\n", line: 3, column: 1,
        message: "did you mean 'policy'?"),
    ErrorCase(
        name: "route bad method", text: "[[route]]\nmatch = \"http://x/*\"\nmethods = [\"get\"]\n", line: 3, column: 12,
        message: "not an HTTP method"),
    ErrorCase(name: "route retry without route", text: "[route.retry]\n", line: 1, column: 1, message: "must follow a [[route]]"),
    ErrorCase(
        name: "route retry unknown key", text: "[[route]]\nmatch = \"http://x/*\"\n[route.retry]\nmax_atempts = 2\n", line: 4, column: 1,
        message: "did you mean 'max_attempts'?"),
    ErrorCase(
        name: "busy poll too long", text: "[proxy]\nbusy_poll = \"50ms\"\n", line: 2, column: 13,
        message: "'busy_poll' must be at most 10ms, got \"50ms\""),
    ErrorCase(
        name: "workers not a count", text: "[proxy]\nworkers = \"all\"\n", line: 2, column: 11,
        message: "expected \"auto\" or a number of event loops from 1 to 256"),
    ErrorCase(
        name: "too many workers", text: "[proxy]\nworkers = 257\n", line: 2, column: 11, message: "from 1 to 256 for 'workers', got 257"),
    ErrorCase(name: "leading zero", text: "[proxy]\nworkers = 01\n", line: 2, column: 11, message: "leading zeros"),
    ErrorCase(name: "misplaced underscore", text: "[proxy]\nmax_connections = 1__0\n", line: 2, column: 20, message: "'_' in a number"),
    ErrorCase(
        name: "plain password", text: "[proxy]\nauth_users = [\"erin:hunter2\"]\n", line: 2, column: 15,
        message: "plain passwords are not accepted"),
    ErrorCase(
        name: "auth user without colon", text: "[proxy]\nauth_users = [\"erin\"]\n", line: 2, column: 15, message: "larder hash-password"),
    ErrorCase(
        name: "auth user name too long", text: "[proxy]\nauth_users = [\"\(String(repeating: "a", count: 257)):$6$s$h\"]\n", line: 2,
        column: 15, message: "a user name is 256 bytes at most, got 257"),
    ErrorCase(
        name: "auth user listed twice", text: "[proxy]\nauth_users = [\"a:$6$s$h\", \"a:$6$t$i\"]\n", line: 2, column: 27,
        message: "listed twice"),
    ErrorCase(name: "auth realm with a quote", text: "[proxy]\nauth_realm = \"a\\\"b\"\n", line: 2, column: 14, message: "without quotes"),
    ErrorCase(
        name: "setup host not a name", text: "[proxy]\nsetup_host = \"http://larder.setup/\"\n", line: 2, column: 14,
        message: "setup_host must be a host name"),
    ErrorCase(name: "setup host an address", text: "[proxy]\nsetup_host = \"10.0.0.1\"\n", line: 2, column: 14, message: "or \"\" to turn"),
    ErrorCase(
        name: "parent and parents", text: "[upstream]\nparent = \"http://a:1\"\nparents = [\"http://b:1\"]\n", line: 3, column: 11,
        message: "not both"),
    ErrorCase(
        name: "parent not a URL", text: "[upstream]\nparents = [\"http://a:1\", \"b:3128\"]\n", line: 2, column: 26, message: "proxy URL"),
    ErrorCase(
        name: "parent listed twice", text: "[upstream]\nparents = [\"http://a:1\", \"http://a:1\"]\n", line: 2, column: 26,
        message: "listed twice"),
    ErrorCase(name: "unknown parent selection", text: "[upstream]\nparent_selection = \"random\"\n", line: 2, column: 20, message: "hash"),
    ErrorCase(
        name: "bad direct entry", text: "[upstream]\ndirect = [\"*.internal\", \"10.0.0.0/33\"]\n", line: 2, column: 25,
        message: "not a host"),
    ErrorCase(
        name: "route parent", text: "[[route]]\nmatch = \"http://x/*\"\nparent = \"none\"\n", line: 3, column: 10, message: "\"direct\""),
    ErrorCase(name: "column counts characters", text: "[disk]\n# é\npath = 'é' x\n", line: 3, column: 12, message: "unexpected text"),
    ErrorCase(
        name: "intercept an address", text: "[tls]\nintercept = [\"a.example\", \"10.0.0.1\"]\n", line: 2, column: 27,
        message: "'10.0.0.1' is not a host name (\"registry.example.org\") or a domain pattern"),
    ErrorCase(
        name: "intercept everything", text: "[tls]\nintercept = [\"*\"]\n", line: 2, column: 14, message: "'*' is not a host name"),
    ErrorCase(name: "never a network", text: "[tls]\nnever = [\"10.0.0.0/8\"]\n", line: 2, column: 10, message: "is not a host name"),
    ErrorCase(
        name: "leaf validity too long", text: "[tls]\nleaf_validity = \"400d\"\n", line: 2, column: 17,
        message: "'leaf_validity' must be at most"),
    ErrorCase(name: "empty ca_dir", text: "[tls]\nca_dir = \"\"\n", line: 2, column: 10, message: "tls.ca_dir must not be empty"),
    ErrorCase(
        name: "tls key misspelt", text: "[tls]\nintercepts = []\n", line: 2, column: 1, message: "did you mean 'intercept'?"),
]

@Suite(.timeLimit(.minutes(1))) struct ConfigLanguageTests {
    @Test(arguments: errorCases)
    fileprivate func reportsErrorAtItsPosition(_ testCase: ErrorCase) throws {
        let found = errors(testCase.text)
        let first = try #require(found.first, "no error for \(testCase.name)")
        #expect(first.position == SourcePosition(line: testCase.line, column: testCase.column), "\(first)")
        #expect(first.message.contains(testCase.message), "\(first)")
        #expect(first.headline.hasPrefix("t.toml:\(testCase.line):\(testCase.column): "))
    }

    @Test func errorShowsTheLineAndACaret() throws {
        let error = try #require(errors("[proxy]\n  header_timeout = 5\n").first)
        #expect(
            error.description
                == "t.toml:2:20: expected a duration like \"5s\" for 'header_timeout', got 5\n    header_timeout = 5\n                     ^"
        )
    }

    @Test func everyIndependentErrorIsReported() {
        let found = errors("[proxy]\nheader_timeout = 5\nbogus = 1\n[memory]\nmax_bytes = 3\n")
        #expect(found.map(\.position.line) == [2, 3, 5])
    }

    @Test func emptyFileGivesExactlyTheDefaults() throws {
        #expect(try config("") == Config())
        #expect(try config("# only a comment\n\n") == Config())
    }

    @Test func sliceSizeIsOffOrAtLeast64KiB() throws {
        #expect(Config().cache.sliceSize == 8 << 20)
        #expect(try config("[cache]\nslice_size = \"0\"\n").cache.sliceSize == 0)
        #expect(try config("[cache]\nslice_size = \"4MiB\"\n").cache.sliceSize == 4 << 20)
        let tooSmall = errors("[cache]\nslice_size = \"1KiB\"\n")
        #expect(tooSmall.count == 1 && tooSmall.first?.description.contains("t.toml:2:14") == true, "\(tooSmall)")
        #expect(tooSmall.first?.description.contains("at least 64KiB") == true)
    }

    @Test func admissionIsAPolicyAndASize() throws {
        #expect(Config().cache.admission == .secondRequest)
        #expect(Config().cache.admissionMinBytes == 8 << 10)
        let parsed = try config("[cache]\nadmission = \"always\"\nadmission_min_bytes = \"64KiB\"\n")
        #expect(parsed.cache.admission == .always && parsed.cache.admissionMinBytes == 64 << 10)
        let unknown = errors("[cache]\nadmission = \"second-request\"\n")
        #expect(unknown.count == 1 && unknown.first?.description.contains("t.toml:2:13") == true, "\(unknown)")
        #expect(unknown.first?.description.contains("second_request") == true, "\(unknown)")
        let negative = errors("[cache]\nadmission_min_bytes = \"-1\"\n")
        #expect(negative.count == 1 && negative.first?.description.contains("t.toml:2:") == true, "\(negative)")
    }

    @Test func workersAreAutoOrACount() throws {
        #expect(Config().proxy.workers == nil)
        #expect(try config("[proxy]\nworkers = \"auto\"\n").proxy.workers == nil)
        #expect(
            errors("[proxy]\nworkers = 0\n").map(\.headline) == [
                "t.toml:2:11: 'workers' must be at least 1, got 0; write \"auto\" for one event loop per usable CPU"
            ])
        #expect(try config("[proxy]\nworkers = 4\n").proxy.workers == 4)
        #expect(Config().proxy.busyPoll == .zero)
    }

    @Test func tlsInterceptsListedHostsButNeverTheNeverList() throws {
        #expect(Config().tls.intercept.isEmpty && !Config().tls.intercepts(host: "example.org"), "off by default")
        let tls = try config(
            """
            [tls]
            intercept = ["registry.example.org", "*.files.example.net"]
            never = ["secret.files.example.net"]
            leaf_validity = "1d"
            splice_after_failures = 5
            splice_for = "10m"
            """
        ).tls
        #expect(tls.intercepts(host: "registry.example.org") && tls.intercepts(host: "REGISTRY.example.org"))
        #expect(tls.intercepts(host: "a.files.example.net") && tls.intercepts(host: "a.b.files.example.net"))
        #expect(!tls.intercepts(host: "files.example.net"), "a *. glob is the names under the domain")
        #expect(!tls.intercepts(host: "secret.files.example.net"), "never wins")
        #expect(!tls.intercepts(host: "example.org") && !tls.intercepts(host: "evilregistry.example.org"))
        #expect(tls.leafValidity == .seconds(86_400) && tls.spliceAfterFailures == 5 && tls.spliceFor == .seconds(600))
    }

    @Test func documentedDefaultsFileEqualsCompiledDefaults() throws {
        let path = ConfigLanguageTests.root + "/config/larder.toml"
        let base = StateDirectory(path: "/srv/state", reason: "test")
        let loaded = try ConfigLoader.load(path: path, stateDirectory: base).get()
        #expect(loaded == Config().resolvingPaths(against: base))
    }

    @Test func readsEveryValueKind() throws {
        let parsed = try config(
            """
            [proxy]
            listen = [
              "127.0.0.1:8080",   # comment inside an array
              "[::1]:8080",
            ]
            allow = ['10.0.0.0/8', "::/0"]
            max_connections = 1_000
            header_timeout = "250ms"
            idle_timeout = "2h"
            max_header_bytes = "32KiB"

            [retry]
            multiplier = 1.5
            jitter = "0s"
            retry_on = ["connect", "429"]

            [cache]
            offline = true
            stale_if_error = "7d"

            [admin]
            listen = ""
            token = "a\\"b\\u00e9"
            """)
        #expect(parsed.proxy.listen.map(\.description) == ["127.0.0.1:8080", "[::1]:8080"])
        #expect(parsed.proxy.allow.map(\.description) == ["10.0.0.0/8", "::/0"])
        #expect(parsed.proxy.maxConnections == 1000)
        #expect(parsed.proxy.headerTimeout == .milliseconds(250))
        #expect(parsed.proxy.idleTimeout == .seconds(7200))
        #expect(parsed.proxy.maxHeaderBytes == 32 * 1024)
        #expect(parsed.retry.multiplier == 1.5)
        #expect(parsed.retry.retryOn == [.connect, .status429])
        #expect(parsed.cache.offline)
        #expect(parsed.cache.staleIfError == .seconds(7 * 86_400))
        #expect(parsed.admin.listen == nil)
        #expect(parsed.admin.token == "a\"b\u{e9}")
    }

    @Test func routesKeepOrderAndRetryOverrides() throws {
        let parsed = try config(
            """
            [retry]
            max_attempts = 2

            [[route]]
            match = "http://*.example.com/*"
            policy = "cache_first"
            ttl = "30d"

            [route.retry]
            strategy = "linear"

            [[route]]
            match = "http://api.internal/graphql"
            methods = ["POST"]
            dedup = "always"
            timeout = "5s"
            """)
        #expect(parsed.routes.count == 2)
        #expect(parsed.routes[0].policy == .cacheFirst)
        #expect(parsed.routes[0].ttl == .seconds(30 * 86_400))
        #expect(parsed.routes[0].retry?.strategy == .linear)
        #expect(parsed.routes[0].retry?.maxAttempts == 2, "unset keys come from [retry]")
        #expect(parsed.routes[1].methods == ["POST"])
        #expect(parsed.routes[1].dedup == .always)
        #expect(parsed.routes[1].retry == nil)
    }

    @Test func deeplyNestedArraysAreRejectedWithoutRecursionBlowUp() {
        let deep = "[proxy]\nx = " + String(repeating: "[", count: 100_000) + "\n"
        let found = errors(deep)
        #expect(found.first?.message.contains("nested more than") == true)
    }

    @Test func longLinesParseInLinearTime() {
        // 50,000 values on one line: quadratic position bookkeeping would take minutes here.
        let items = Array(repeating: "\"127.0.0.1:1\"", count: 50_000).joined(separator: ",")
        let parsed = try? config("[proxy]\nlisten = [\(items)]\n")
        #expect(parsed?.proxy.listen.count == 50_000)
    }

    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()
}

@Suite(.timeLimit(.minutes(1))) struct UnitsTests {
    @Test func parsesDurationsAndSizes() {
        #expect(Units.duration("250ms") == .milliseconds(250))
        #expect(Units.duration("1.5s") == .milliseconds(1500))
        #expect(Units.duration("7d") == .seconds(604_800))
        #expect(Units.duration("100us") == .microseconds(100))
        #expect(Units.duration("2.5µs") == .nanoseconds(2500))
        #expect(Units.duration("0") == .zero)
        #expect(Units.format(.microseconds(150)) == "150us")
        #expect(Units.format(.milliseconds(1)) == "1ms")
        #expect(Units.duration("5") == nil)
        #expect(Units.duration("-5s") == nil)
        #expect(Units.size("512KiB") == 524_288)
        #expect(Units.size("10GiB") == 10_737_418_240)
        #expect(Units.size("1MB") == 1_000_000)
        #expect(Units.size("1mb") == nil)
    }
}

@Suite struct RouteKeyTests {
    @Test func anImmutableRouteKeysByItsTemplateAndKeepsObjectsForLong() throws {
        let parsed = try config(
            "[[route]]\nmatch = \"http://mirror.example.org/debian/*\"\nimmutable = true\nkey = \"debian:{path}\"\n"
                + "ignore_query = [\"X-Amz-*\", \"sig\"]\n")
        let route = try #require(parsed.routes.first)
        #expect(route.policy == .cacheFirst && route.ttl == .seconds(10 * 365 * 86_400), "immutable: kept whatever the headers say")
        #expect(route.key?.parts == [.literal("debian:"), .path])
        #expect(route.key?.leavesOutPartOfURL == true && route.hasCustomKey)
        let whole = try KeyTemplate(parsing: "{scheme}://{host}:{port}{path}?{query}")
        #expect(!whole.leavesOutPartOfURL)
    }

    /// Several hosts share a key only when each is named (one route per mirror) or when the
    /// body is checked against the URL's digest.
    @Test func hostlessKeysOnNamedHostsOrDigestRoutesOnly() throws {
        let named = try config(
            "[[route]]\nmatch = \"http://a.example/debian/*\"\nimmutable = true\nkey = \"debian:{path}\"\n"
                + "[[route]]\nmatch = \"http://b.example/debian/*\"\nimmutable = true\nkey = \"debian:{path}\"\n")
        #expect(named.routes.count == 2)
        let digest = try config("[[route]]\nmatch = \"http://*/*/by-hash/SHA256/{digest}\"\ndigest = \"sha256\"\n")
        let route = try #require(digest.routes.first)
        #expect(route.immutable && route.policy == .cacheFirst, "a digest pins the body")
        #expect(route.key?.text == "sha256:{digest}", "one entry per digest by default")
        let table = RouteTable(digest.routes)
        let hex = String(repeating: "0123456789abcdef", count: 4)
        let path = "/debian/dists/x/by-hash/SHA256/"
        #expect(table.match(method: "GET", scheme: "http", host: "any.example", port: 80, pathAndQuery: path + hex) != nil)
        #expect(route.expectedDigest(in: path + hex) == hex[...])
        for bad in [String(hex.dropLast()), hex.uppercased(), hex + "?x=1", hex + "/x"] {
            #expect(
                table.match(method: "GET", scheme: "http", host: "any.example", port: 80, pathAndQuery: path + bad) == nil,
                "\(bad) is not a SHA-256 digest: the route does not apply")
        }
    }

    @Test func resolveEntriesPinNamesToAddresses() throws {
        let parsed = try config("[upstream]\nresolve = [\"Deb.Debian.org:80:127.0.0.2,::1\", \"[::1]:443:127.0.0.1\"]\n")
        let entries = parsed.upstream.resolve
        #expect(entries.map(\.curlForm) == ["deb.debian.org:80:127.0.0.2,[::1]", "[::1]:443:127.0.0.1"])
        #expect(ResolveEntry.addresses(for: "deb.debian.org", port: 80, in: entries)?.map(\.description) == ["127.0.0.2:80", "[::1]:80"])
        #expect(ResolveEntry.addresses(for: "deb.debian.org", port: 443, in: entries) == nil)
        #expect(ResolveEntry.addresses(for: "[::1]", port: 443, in: entries)?.first?.description == "127.0.0.1:443")
        #expect(errors("[upstream]\nresolve = [\"a:80:127.0.0.1\", \"A:80:127.0.0.2\"]\n").first?.message.contains("pinned twice") == true)
        #expect(!errors("[upstream]\nresolve = [\"a:0:127.0.0.1\"]\n").isEmpty)
    }
}

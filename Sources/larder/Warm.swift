import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import LarderHTTP
import LarderIO
import Synchronization

/// `larder warm`: fetches URLs through the proxy so they are in the cache before anyone asks.
struct Warm: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Prefetch URLs into the cache through the running proxy.",
        usage: "larder warm [<options>] [<urls> ...]",
        discussion: """
            Each URL is fetched through the proxy (and so stored, when cacheable). A
            progress bar shows on a terminal; the summary counts and sizes what was
            fetched (stored, or not cacheable) apart from what was already cached
            (the proxy's Cache-Status said hit), and what failed. Exit status 1 when
            any fetch failed.
            Examples:
              larder warm http://deb.debian.org/debian/dists/bookworm/Release
              larder warm --file urls.txt --parallel 8
            """)

    @Argument(help: "URLs to fetch.")
    var urls: [String] = []

    @Option(name: .customLong("file"), help: "A file with one URL per line (# starts a comment).")
    var file: String?

    @Option(
        name: .customLong("proxy"),
        help: "Proxy address, as 127.0.0.1:3128 or http://127.0.0.1:3128 (default: the first proxy.listen of the configuration).")
    var proxy: String?

    @Option(name: .customLong("parallel"), help: "Fetches at a time.")
    var parallel = 4

    @OptionGroup var options: AdminOptions

    enum Result: Sendable {
        case stored(Int)
        case cached(Int)
        case notCacheable(Int)
        case failed(String)
    }

    /// `--proxy`'s address: `HOST:PORT` of a numeric host, or the same as `http://HOST:PORT/`,
    /// the form `larder client --proxy` and clients' `http_proxy` take.
    static func proxyAddress(_ text: String) -> SocketAddress? {
        var address = Substring(text)
        if address.lowercased().hasPrefix("http://") { address = address.dropFirst(7) }
        if address.hasSuffix("/") { address = address.dropLast() }
        return SocketAddress(parsing: String(address))
    }

    /// The URLs of a list file, with every line that is not one named by number (it is skipped;
    /// the rest are still fetched).
    static func parseList(_ text: String, file: String) -> (urls: [String], problems: [String]) {
        var urls: [String] = []
        var problems: [String] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let entry = Text.trimmed(line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0])
            if entry.isEmpty { continue }
            if isAbsolute(entry) {
                urls.append(entry)
            } else {
                problems.append("\(file):\(number + 1): '\(entry)' is not an absolute http(s) URL; skipped")
            }
        }
        return (urls, problems)
    }

    static func isAbsolute(_ url: String) -> Bool { url.hasPrefix("http://") || url.hasPrefix("https://") }

    func run() throws {
        for url in urls where !Warm.isAbsolute(url) {
            throw ValidationError("'\(url)' is not an absolute http(s) URL")
        }
        var list = urls
        var skipped = 0
        if let file {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let parsed = Warm.parseList(text, file: file)
            for problem in parsed.problems { printError(problem) }
            skipped = parsed.problems.count
            list += parsed.urls
        }
        guard !list.isEmpty else {
            throw ValidationError(skipped > 0 ? "no valid URLs in \(file ?? "the list")" : "no URLs: give them as arguments or with --file")
        }
        let address: SocketAddress
        if let proxy {
            guard let parsed = Warm.proxyAddress(proxy) else {
                throw ValidationError("--proxy: '\(proxy)' is not an address like 127.0.0.1:3128 (or http://127.0.0.1:3128)")
            }
            address = parsed
        } else {
            guard let first = try options.loadConfig().proxy.listen.first else { throw ValidationError("no proxy address") }
            address = first
        }
        let progress = Progress(total: list.count, interactive: isatty(2) == 1)
        let results = Locked<[Int: Result]>([:])
        let next = Atomic<Int>(0)
        let urls = list
        DispatchQueue.concurrentPerform(iterations: max(1, min(parallel, list.count))) { _ in
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < urls.count else { return }
                let result = Warm.fetch(urls[index], through: address, progress: progress)
                results.withLock { $0[index] = result }
                progress.finished(urls[index], result)
            }
        }
        progress.done()
        var summary = Summary(skipped: skipped)
        for result in results.withLock({ $0.values }) { summary.add(result) }
        print(summary.line)
        if summary.failed > 0 { throw ExitCode(1) }
    }

    /// What a run did: URLs fetched from upstream (stored, or not cacheable) apart from those
    /// the cache already held, each with its bytes.
    struct Summary {
        var stored = 0
        var notCacheable = 0
        var cached = 0
        var failed = 0
        var fetchedBytes = 0
        var cachedBytes = 0
        let skipped: Int

        init(skipped: Int) {
            self.skipped = skipped
            failed = skipped
        }

        mutating func add(_ result: Result) {
            switch result {
            case .stored(let size):
                stored += 1
                fetchedBytes += size
            case .notCacheable(let size):
                notCacheable += 1
                fetchedBytes += size
            case .cached(let size):
                cached += 1
                cachedBytes += size
            case .failed: failed += 1
            }
        }

        /// `5 URLs: 2 fetched (1 stored, 1 not cacheable; 2.0 KiB), 1 already cached (4.0 KiB), 2 failed`.
        var line: String {
            let total = stored + notCacheable + cached + failed
            let bad = skipped > 0 ? " (\(skipped) bad list line\(skipped == 1 ? "" : "s"))" : ""
            return "\(total) URL\(total == 1 ? "" : "s"): "
                + "\(stored + notCacheable) fetched (\(stored) stored, \(notCacheable) not cacheable; \(Format.bytes(Double(fetchedBytes)))), "
                + "\(cached) already cached (\(Format.bytes(Double(cachedBytes)))), \(failed) failed\(bad)"
        }
    }

    static func fetch(_ url: String, through address: SocketAddress, progress: Progress) -> Result {
        let authority = url.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? ""
        do {
            let response = try BlockingHTTPClient(address: address, timeoutSeconds: 300).request(
                "GET", url, headers: [("Host", authority), ("User-Agent", "larder-warm/\(Larder.version)")],
                onBody: { progress.received($0.count) })
            guard (200..<400).contains(response.status) else {
                // The status, and Larder's own reason when it made the error (Cache-Status detail).
                let detail = response.headers.values("Cache-Status").last.flatMap { status in
                    status.firstRange(of: "detail=").map {
                        Text.trimmed(status[$0.upperBound...], also: ["\""])
                    }
                }
                return .failed("HTTP \(response.status)" + (detail.map { ": \($0)" } ?? ""))
            }
            // Larder's own Cache-Status member says where the body came from: a hit, or a
            // stored copy the origin confirmed unchanged (a 304 to a revalidation), was
            // already cached; anything else was fetched.
            let member = CacheStatusMember.last(named: "larder", in: response.headers.values("Cache-Status"))
            if member?.isHit == true || member?.parameter("fwd-status") == "304" { return .cached(response.bodyLength) }
            if member?.parameter("stored") != nil { return .stored(response.bodyLength) }
            return .notCacheable(response.bodyLength)
        } catch {
            return .failed("\(error)")
        }
    }

    /// The progress bar (on a terminal) or one line per URL (otherwise), on stderr.
    final class Progress: Sendable {
        private struct State {
            var done = 0
            var bytes = 0
            var lastDraw = 0.0
        }
        private let state = Locked(State())
        let total: Int
        let interactive: Bool

        init(total: Int, interactive: Bool) {
            self.total = total
            self.interactive = interactive
        }

        func received(_ count: Int) {
            let draw = state.withLock { state -> Bool in
                state.bytes += count
                let now = Clocks.monotonicSeconds()
                guard interactive, now - state.lastDraw > 0.1 else { return false }
                state.lastDraw = now
                return true
            }
            if draw { redraw() }
        }

        func finished(_ url: String, _ result: Result) {
            state.withLock { $0.done += 1 }
            if interactive {
                // A failure is printed above the bar (cleared first), which is drawn again below.
                if case .failed(let why) = result { printError("\r\u{1B}[K\(url): FAILED (\(why))") }
                redraw()
            } else {
                let text: String
                switch result {
                case .stored: text = "stored"
                case .cached: text = "already cached"
                case .notCacheable: text = "not cacheable"
                case .failed(let why): text = "FAILED (\(why))"
                }
                printError("\(url): \(text)")
            }
        }

        private func redraw() {
            let (done, bytes) = state.withLock { ($0.done, $0.bytes) }
            let width = 30
            let filled = total > 0 ? done * width / total : width
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let line = "\r[\(bar)] \(done)/\(total)  \(Format.bytes(Double(bytes)))   "
            // Through the syscall helper (EINTR retried, short writes finished); a terminal that
            // went away only loses the bar.
            try? FileSystem.writeAll(2, Array(line.utf8))
        }

        func done() {
            if interactive { printError("") }
        }
    }
}

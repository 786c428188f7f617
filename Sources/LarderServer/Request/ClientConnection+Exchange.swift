import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO

/// The request pipeline of a connection: target checks, route, then the cache decision
/// (RFC 9111 §4 and the route's policy): serve what is stored, revalidate it, or forward.
extension ClientConnection {
    /// Starts answering a parsed request.
    /// Takes the head (moved, not copied: a copy retains each of its strings and arrays).
    /// `moved`: the request was picked up on another loop then, its body (if any) read whole
    /// there (``resume(_:)``).
    func begin(_ head: consuming RequestHead, moved: (startNanos: UInt64, body: [UInt8]?)? = nil) {
        let runtime = proxy.runtime
        // Framing is checked on the local head, before it moves: passing `exchange.head` would
        // copy it out of the class first.
        let checked = Result { () throws(HTTPParseError) in try BodyFraming.ofRequest(head) }
        // Started when the loop picked up the head's last bytes (its time after the wait), which
        // is also a clock read less per request.
        let exchange = Exchange(
            head: consume head, startNanos: moved?.startNanos ?? proxy.loop.now, runtime: runtime, moved: moved != nil)
        self.exchange = exchange

        let framing: BodyFraming
        switch checked {
        case .success(let found):
            framing = found
        case .failure(let error):
            proxy.telemetry.stats[.badRequests].add(1)
            rejectAndClose(error)
            return
        }
        exchange.requestFraming = framing
        if let body = moved?.body {
            exchange.bufferedBody = body
            exchange.body = RequestBodyReader(framing: .none)  // read to its end
        } else if framing != .none {
            exchange.body = RequestBodyReader(framing: framing)
        }

        if kind == .admin {
            answerAdmin(exchange)
            return
        }

        // Inside an intercepted session the client already authenticated its CONNECT, and
        // sends the origin no Proxy-Authorization.
        let users = runtime.config.proxy.authUsers
        if !users.isEmpty, interception == nil {
            switch proxy.process.authenticator.check(
                exchange.head.headers.values("Proxy-Authorization"), users: users, now: proxy.loop.now)
            {
            case .allowed:
                break
            case .denied(let reason):
                return refuseAuthentication(reason, exchange: exchange)
            case .verify(let job):
                return waitForAuthentication(job, exchange: exchange)
            }
        }
        route(exchange)
    }

    /// Checks the target and routes the request (after authentication, if any).
    func route(_ exchange: Exchange) {
        exchange.admitted = true
        // `exchange.head` is read in place here and below: a local copy retains its strings.
        let runtime = exchange.runtime
        let url: AbsoluteURL
        if let interception {
            guard let inside = connect?.interceptedURL(exchange, interception: interception) else { return }
            url = inside
        } else {
            switch exchange.head.target {
            case .absolute(let absolute):
                if answersSetupPage(absolute, exchange: exchange) { return }
                url = absolute
            case .origin, .asterisk:
                // RFC 9112 §3.2.2: a proxy is sent absolute-form targets; this client thinks it is
                // talking to an origin server.
                respondGenerated(
                    status: 400,
                    message: "Larder is a forward proxy: send requests in absolute form (GET http://host/path), "
                        + "for example by setting http_proxy=http://\(proxyAddressHint)" + setupPageHint(exchange),
                    outcome: .error)
                return
            case .authority(let host, let port):
                if refusesSetupTunnel(host: host, exchange: exchange) { return }
                beginTunnel(host: host, port: port, exchange: exchange)
                return
            }
        }
        if refusesDestination(host: url.bareHost, port: url.port, exchange: exchange) { return }

        exchange.route = runtime.routes.match(
            method: exchange.head.method.rawValue, scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery)
        exchange.url = url
        let key = CacheKey(url, route: exchange.route)
        exchange.key = key
        if exchange.route?.hasCustomKey == true { exchange.customKey = key.url }
        exchange.policy = exchange.route?.policy ?? runtime.config.cache.defaultPolicy
        if exchange.head.headers.contains("Cache-Control") || exchange.head.headers.contains("Pragma") {
            exchange.directives = RequestDirectives(exchange.head.headers)
        }
        if exchange.take(.routed) == .lookUp { proceed(exchange) }
    }

    /// Decides between the cache and the origin. Called again after a disk entry's checksum was
    /// checked in the background.
    func proceed(_ exchange: Exchange) {
        guard let url = exchange.url, let key = exchange.key else { return }
        let config = exchange.runtime.config
        let offline = config.cache.offline
        let method = exchange.head.method
        guard method == .get || method == .head else {
            if offline { return respondOffline(exchange) }
            // Other methods go to the origin; a successful unsafe one invalidates (§4.4).
            exchange.cacheStatus = .forwarded(.method)
            forward(url, key: key, exchange: exchange)
            return
        }
        if exchange.policy == .networkOnly || Preconditions.hasOriginConditions(exchange.head.headers) {
            if offline { return respondOffline(exchange) }
            exchange.cacheStatus = .forwarded(exchange.policy == .networkOnly ? .bypass : .request)
            forward(url, key: key, exchange: exchange)
            return
        }
        var varyMiss = false
        let stored: StoredResponse?
        var fromDisk = false
        switch lookup(key, exchange: exchange, varyMiss: &varyMiss) {
        case .pending:
            return
        case .found(let found, let onDisk):
            stored = found
            fromDisk = onDisk
        case .none:
            stored = nil
        }
        let now = Clocks.wallSeconds()
        let decision = CacheDecision.decide(
            stored: stored, request: exchange.directives, policy: exchange.policy,
            ttl: exchange.route?.ttl?.totalSeconds, negativeTTL: exchange.runtime.negativeTTL, now: now, offline: offline)
        switch decision {
        case .serve:
            serveFromCache(stored!, exchange: exchange, stale: false, now: now, fromDisk: fromDisk)
        case .serveStale(let refresh):
            serveFromCache(stored!, exchange: exchange, stale: true, now: now, fromDisk: fromDisk, refreshing: refresh)
            if refresh { refreshInBackground(stored!, url: url, exchange: exchange) }
        case .revalidate:
            exchange.stored = stored
            exchange.cacheStatus = .forwarded(exchange.directives.noCache ? .request : .stale)
            forward(url, key: key, exchange: exchange)
        case .forward(let reason):
            exchange.stored = stored  // kept as the stale-if-error fallback
            exchange.cacheStatus = .forwarded(varyMiss && stored == nil ? .varyMiss : reason)
            // Nothing whole stored: the object may be kept (or fetched) as slices.
            if stored == nil && beginsSlices(exchange) { return }
            forward(url, key: key, exchange: exchange)
        case .unsatisfiable:
            // Offline or only-if-cached: slices stored may still answer.
            if stored == nil && beginsSlices(exchange, cachedOnly: true) { return }
            respondNotCached(exchange)
        }
    }

    /// 504 for a request that may only be answered from the cache, with nothing suitable
    /// stored (offline, or RFC 9111 §5.2.1.7 only-if-cached).
    func respondNotCached(_ exchange: Exchange) {
        if exchange.runtime.config.cache.offline { return respondOffline(exchange) }
        exchange.cacheStatus = .forwarded(.miss)
        exchange.cacheStatus.detail = "only-if-cached"
        respondGenerated(status: 504, message: "Larder: not in the cache (only-if-cached)", outcome: .miss, cause: .uncached)
    }

    private func respondOffline(_ exchange: Exchange) {
        exchange.cacheStatus = .forwarded(.miss)
        exchange.cacheStatus.detail = "offline"
        respondGenerated(status: 504, message: "Larder is offline and has no stored copy", outcome: .miss, cause: .offline)
    }

    enum LookupResult {
        /// `fromDisk`: the stored response came from the disk tier (its body may have been
        /// read into memory to be checked): `Cache-Status: …; detail=disk`, a disk hit.
        case found(StoredResponse, fromDisk: Bool)
        case none
        /// A disk entry is being verified; ``proceed(_:)`` runs again when it is done.
        case pending
    }

    /// The stored variant for this request, from memory, then disk (``TieredCache``).
    private func lookup(_ key: CacheKey, exchange: Exchange, varyMiss: inout Bool) -> LookupResult {
        let checked = exchange.takeCheckedEntry()
        switch proxy.cache.lookup(key, request: exchange.head.headers, checked: checked) {
        case .found(let stored, let fromDisk):
            return .found(stored, fromDisk: fromDisk)
        case .miss(let otherVariants):
            varyMiss = otherVariants
            return .none
        case .pending(let name):
            waitForVerification(of: name)
            return .pending
        }
    }

    /// Answers from a stored response: 304 for a matching conditional request, 206/416 for a
    /// range, else the whole response.
    func serveFromCache(
        _ stored: StoredResponse, exchange: Exchange, stale: Bool, now: Double, fromDisk: Bool = false, refreshing: Bool = false,
        status: CacheStatus? = nil
    ) {
        var cacheStatus = status ?? CacheStatus()
        if status == nil {
            cacheStatus.hit = true
            // RFC 9211 §2.2: the remaining freshness as this cache judges it; under cache_first
            // that is the route's ttl for a success, not the origin's (a negative ttl would say
            // "stale"), and at most cache.negative_ttl for anything else.
            var lifetime = CacheDecision.lifetime(of: stored, negativeTTL: exchange.runtime.negativeTTL)
            if exchange.policy == .cacheFirst, CacheDecision.isSuccess(stored.status), let ttl = exchange.route?.ttl?.totalSeconds {
                lifetime = ttl
            }
            cacheStatus.ttl = Int((lifetime - stored.currentAge(now: now)).rounded(.down))
            var details: [String] = []
            if stored.isOnDisk || fromDisk { details.append("disk") }
            if exchange.runtime.config.cache.offline && stale {
                details.append("offline")
            } else if stale {
                details.append(refreshing ? "stale-while-revalidate" : "stale")
            }
            cacheStatus.detail = details.isEmpty ? nil : details.joined(separator: "-")
        }
        exchange.cacheStatus = cacheStatus
        exchange.outcome =
            status != nil
            ? (status?.fwdStatus == 304 ? .revalidated : .stale)
            : stale ? .stale : (stored.isOnDisk || fromDisk ? .diskHit : .memoryHit)
        let request = exchange.head.headers
        if Preconditions.notModified(request: request, status: stored.status, etag: stored.etag, lastModified: stored.lastModified) {
            exchange.status = 304
            queueNotModified(headers: stored.headers, age: stored.currentAge(now: now), exchange: exchange)
        } else if exchange.head.method == .get, stored.status == 200, request.contains("Range") {
            let resolution = RangeRequest.resolve(request: request, length: stored.bodyLength, responseHeaders: stored.headers)
            queueStored(stored, exchange: exchange, range: resolution, now: now)
        } else {
            queueStored(stored, exchange: exchange, range: .full, now: now)
        }
        // A body sent from the disk tier block by block ends the exchange with its last block.
        if exchange.diskBody == nil { finishExchange() }
        flushSoon()
    }

    /// Checks a disk entry's body on the reader thread, then resumes this exchange on its loop.
    func waitForVerification(of name: EntryName) {
        exchange?.take(.diskCheckStarted)
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        proxy.cache.verify(name) { verification in
            handle.execute { loop in (loop.context as? ProxyLoop)?.unpark(token)?.resumeAfterDiskCheck(verification) }
        }
    }

    func resumeAfterDiskCheck(_ verification: DiskCache.Verification) {
        guard phase == .exchanging, let exchange else { return }
        var checked: StoredResponse?
        if case .sound(let entry?) = verification { checked = entry }
        switch exchange.take(.diskChecked(checked)) {
        case .lookUp:
            proceed(exchange)
            flushSoon()
        case .walkSlices:
            if pumpFill() { flushSoon() }
        default:
            break
        }
    }
}

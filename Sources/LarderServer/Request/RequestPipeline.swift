import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO

/// The request side of one loop: what a parsed request goes through after its connection
/// handed it over (``begin(_:on:moved:)``): authentication, target checks, the route, then the
/// cache decision (RFC 9111 §4 and the route's policy): serve what is stored, revalidate it,
/// or forward. It also answers the connection's questions about the exchange it carries
/// (more input, room in the output, everything written, a deadline, the end), so the
/// connection itself knows nothing of the cache, routes or fills.
///
/// The answers themselves (stored responses, fills, slices, disk bodies, admin) are written
/// by the connection's request extensions, which the pipeline calls, through the connection's
/// narrow interface (``ClientConnection/sendHead(_:)``, ``ClientConnection/sendBodyPart(_:from:count:exchange:)``,
/// ``ClientConnection/outputHasRoom``, ``ClientConnection/closeAfterResponse()``,
/// ``ClientConnection/takeRequestBody(_:into:)``): none touches its output queue or parser.
///
/// State: loop-confined; one per ``ProxyLoop``.
final class RequestPipeline {
    /// Attach-or-start for the fetches of this loop.
    let coalescer: Coalescer

    init(loop: EventLoop, fills: FillRegistry) {
        coalescer = Coalescer(loop: loop, registry: fills.isActive ? fills : nil)
    }

    // MARK: A request, from its head to the cache decision

    /// Starts answering a request `connection` parsed.
    /// Takes the head (moved, not copied: a copy retains each of its strings and arrays).
    /// `moved`: the request was picked up on another loop then, its body (if any) read whole
    /// there (``ClientConnection/resume(_:)``).
    func begin(
        _ head: consuming RequestHead, on connection: ClientConnection, moved: (startNanos: UInt64, body: [UInt8]?)? = nil
    ) {
        let proxy = connection.proxy
        let runtime = proxy.runtime
        // Framing is checked on the local head, before it moves: passing `exchange.head` would
        // copy it out of the class first.
        let checked = Result { () throws(HTTPParseError) in try BodyFraming.ofRequest(head) }
        // Started when the loop picked up the head's last bytes (its time after the wait), which
        // is also a clock read less per request.
        let exchange = Exchange(
            head: consume head, startNanos: moved?.startNanos ?? proxy.loop.now, runtime: runtime, moved: moved != nil)
        connection.exchange = exchange

        let framing: BodyFraming
        switch checked {
        case .success(let found):
            framing = found
        case .failure(let error):
            proxy.telemetry.stats[.badRequests].add(1)
            connection.rejectAndClose(error)
            return
        }
        exchange.requestFraming = framing
        if let body = moved?.body {
            exchange.bufferedBody = body
            exchange.body = RequestBodyReader(framing: .none)  // read to its end
        } else if framing != .none {
            exchange.body = RequestBodyReader(framing: framing)
        }

        if connection.kind == .admin {
            connection.answerAdmin(exchange)
            return
        }

        // Inside an intercepted session the client already authenticated its CONNECT, and
        // sends the origin no Proxy-Authorization.
        let users = runtime.config.proxy.authUsers
        // Who this request is let in as, not an earlier one on the connection (review 122: a
        // CONNECT let in while authentication was off must not carry an earlier user's name).
        if connection.interception == nil { connection.authenticatedUser = nil }
        if !users.isEmpty {
            guard connection.interception != nil else { return connection.authenticate(exchange, users: users) }
            // An intercepted session moved here from a loop that had not applied the reload yet.
            guard ProxyAuthenticator.isCurrent(connection.authenticatedUser, users: users) else { return connection.close() }
        }
        route(exchange, on: connection)
    }

    /// Checks the target and routes the request (after authentication, if any).
    func route(_ exchange: Exchange, on connection: ClientConnection) {
        exchange.admitted = true
        // `exchange.head` is read in place here and below: a local copy retains its strings.
        let runtime = exchange.runtime
        let url: AbsoluteURL
        if let interception = connection.interception {
            guard let inside = connection.connect?.interceptedURL(exchange, interception: interception) else { return }
            url = inside
        } else {
            switch exchange.head.target {
            case .absolute(let absolute):
                if connection.answersSetupPage(absolute, exchange: exchange) { return }
                url = absolute
            case .origin, .asterisk:
                // RFC 9112 §3.2.2: a proxy is sent absolute-form targets; this client thinks it is
                // talking to an origin server.
                connection.respondGenerated(
                    status: 400,
                    message: "Larder is a forward proxy: send requests in absolute form (GET http://host/path), "
                        + "for example by setting http_proxy=http://\(connection.proxyAddressHint)"
                        + connection.setupPageHint(exchange),
                    outcome: .error)
                return
            case .authority(let host, let port):
                if connection.refusesSetupTunnel(host: host, exchange: exchange) { return }
                connection.beginTunnel(host: host, port: port, exchange: exchange)
                return
            }
        }
        if connection.refusesDestination(host: url.bareHost, port: url.port, exchange: exchange) { return }

        let route = runtime.routes.match(
            method: exchange.head.method.rawValue, scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery)
        exchange.url = url
        // Most requests match no route. An initializer's argument is copied to it (through the
        // runtime's generic Optional copy of a large value, nil too): none is passed then.
        let key = route.map { CacheKey(url, route: $0) } ?? CacheKey(url)
        exchange.key = key
        if route?.hasCustomKey == true { exchange.customKey = key.url }
        exchange.policy = route?.policy ?? runtime.config.cache.defaultPolicy
        // Moved, not copied (``Exchange/hasRoute``).
        exchange.route = consume route
        if exchange.head.headers.contains(.cacheControl) || exchange.head.headers.contains(.pragma) {
            exchange.directives = RequestDirectives(exchange.head.headers)
        }
        if exchange.take(.routed) == .lookUp { proceed(exchange, on: connection) }
    }

    /// Decides between the cache and the origin. Called again after a disk entry's checksum was
    /// checked in the background.
    func proceed(_ exchange: Exchange, on connection: ClientConnection) {
        guard let url = exchange.url, let key = exchange.key else { return }
        let config = exchange.runtime.config
        let offline = config.cache.offline
        let method = exchange.head.method
        guard method == .get || method == .head else {
            if offline { return connection.respondOffline(exchange) }
            // Other methods go to the origin; a successful unsafe one invalidates (§4.4).
            exchange.cacheStatus = .forwarded(.method)
            connection.forward(url, key: key, exchange: exchange)
            return
        }
        if exchange.policy == .networkOnly || Preconditions.hasOriginConditions(exchange.head.headers) {
            if offline { return connection.respondOffline(exchange) }
            exchange.cacheStatus = .forwarded(exchange.policy == .networkOnly ? .bypass : .request)
            connection.forward(url, key: key, exchange: exchange)
            return
        }
        var varyMiss = false
        let stored: StoredResponse?
        var fromDisk = false
        switch lookup(key, exchange: exchange, on: connection, varyMiss: &varyMiss) {
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
            connection.serveFromCache(stored!, exchange: exchange, stale: false, now: now, fromDisk: fromDisk)
        case .serveStale(let refresh):
            connection.serveFromCache(stored!, exchange: exchange, stale: true, now: now, fromDisk: fromDisk, refreshing: refresh)
            if refresh { connection.refreshInBackground(stored!, url: url, exchange: exchange) }
        case .revalidate:
            exchange.stored = stored
            exchange.cacheStatus = .forwarded(exchange.directives.noCache ? .request : .stale)
            connection.forward(url, key: key, exchange: exchange)
        case .forward(let reason):
            exchange.stored = stored  // kept as the stale-if-error fallback
            exchange.cacheStatus = .forwarded(varyMiss && stored == nil ? .varyMiss : reason)
            // Nothing whole stored: the object may be kept (or fetched) as slices.
            if stored == nil && connection.beginsSlices(exchange) { return }
            connection.forward(url, key: key, exchange: exchange)
        case .unsatisfiable:
            // Offline or only-if-cached: slices stored may still answer.
            if stored == nil && connection.beginsSlices(exchange, cachedOnly: true) { return }
            connection.respondNotCached(exchange)
        }
    }

    enum LookupResult {
        /// `fromDisk`: the stored response came from the disk tier (its body may have been
        /// read into memory to be checked): `Cache-Status: …; detail=disk`, a disk hit.
        case found(StoredResponse, fromDisk: Bool)
        case none
        /// A disk entry is being verified; ``proceed(_:on:)`` runs again when it is done.
        case pending
    }

    /// The stored variant for this request, from memory, then disk (``TieredCache``).
    private func lookup(_ key: CacheKey, exchange: Exchange, on connection: ClientConnection, varyMiss: inout Bool) -> LookupResult {
        let proxy = connection.proxy
        let checked = exchange.takeCheckedEntry()
        switch proxy.cache.lookup(key, request: exchange.head.headers, checked: checked) {
        case .found(let stored, let fromDisk):
            return .found(stored, fromDisk: fromDisk)
        case .miss(let otherVariants):
            varyMiss = otherVariants
            return .none
        case .pending(let name):
            waitForVerification(of: name, key: key, on: connection)
            return .pending
        }
    }

    /// Checks the disk entry `name` of `key` on the reader thread, then resumes `connection`'s
    /// exchange on its loop.
    func waitForVerification(of name: EntryName, key: CacheKey, on connection: ClientConnection) {
        let proxy = connection.proxy
        connection.exchange?.take(.diskCheckStarted)
        let token = proxy.park(connection)
        let handle = proxy.loop.handle
        proxy.cache.verify(name, key: key) { verification in
            handle.execute { loop in
                guard let proxy = loop.context as? ProxyLoop, let connection = proxy.unpark(token) else { return }
                proxy.pipeline.resumeAfterDiskCheck(verification, on: connection)
            }
        }
    }

    private func resumeAfterDiskCheck(_ verification: DiskCache.Verification, on connection: ClientConnection) {
        guard connection.isExchanging, let exchange = connection.exchange else { return }
        switch exchange.take(.diskChecked(verification)) {
        case .lookUp:
            proceed(exchange, on: connection)
            connection.flushSoon()
        case .walkSlices:
            if connection.pumpFill() { connection.flushSoon() }
        default:
            break
        }
    }

    // MARK: What the connection asks of the exchange it carries

    /// Bytes arrived while `exchange` is being answered: its request body, buffered or sent
    /// on by the fill waiting for it.
    func inputArrived(_ exchange: Exchange, on connection: ClientConnection) {
        if exchange.bufferingBody {
            connection.bufferRequestBody(exchange)
            return
        }
        if exchange.upstreamWaitsForBody, connection.hasUnreadInput {
            exchange.upstreamWaitsForBody = false
            exchange.fill?.transfer?.resumeSending()
        }
    }

    /// Room in the output: the next block of a disk body can be read meanwhile.
    @inline(__always)
    func outputHasRoom(_ exchange: Exchange, on connection: ClientConnection) {
        if exchange.diskBody != nil { connection.pumpDiskBody(exchange) }
    }

    /// Everything queued is written: a streaming response queues more of its body, if any
    /// arrived. Returns whether anything changed.
    @inline(__always)
    func outputWritten(_ exchange: Exchange, on connection: ClientConnection) -> Bool {
        guard exchange.fill != nil || exchange.isSliced else { return false }
        return connection.pumpFill()
    }

    /// Every byte of `exchange`'s response is queued: it leaves its fill, if any; the
    /// connection then counts and logs it (``ClientConnection/endExchange(_:flushing:)``). A
    /// fill's own pass does not come here: its reader answers the pass that it left, and the
    /// fill removes it there.
    func finished(_ exchange: Exchange, on connection: ClientConnection) {
        let fill = exchange.fill
        exchange.take(.finished)
        fill?.detach(connection)
    }

    /// The connection closed under `exchange` (its client left, or an error): it leaves its
    /// fill and is logged.
    func abandon(_ exchange: Exchange, on connection: ClientConnection) {
        if exchange.status == 0 {
            exchange.status = 499  // client closed before the response
            exchange.failure = .clientGone
        }
        exchange.fill?.detach(connection)
        connection.leaveShareWait(exchange)
        connection.connect?.abandon()
        connection.record(exchange)
    }

    /// The loop's sweep: a client waiting on a shared fill that has not answered goes on alone.
    /// Returns whether it did.
    func waitedTooLong(_ exchange: Exchange, now: UInt64, on connection: ClientConnection) -> Bool {
        guard exchange.cacheStatus.collapsed, !exchange.headSent, let url = exchange.url,
            now &- exchange.waitStart >= exchange.runtime.config.coalesce.waitTimeout.totalNanoseconds
        else { return false }
        let proxy = connection.proxy
        exchange.fill?.detach(connection)
        proxy.telemetry.stats[.waitersTimedOut].add(1)
        if exchange.isSliced {
            connection.leaveSliceFillAlone(exchange)
            return true
        }
        connection.leaveFill(exchange, url: url, alone: true)
        return true
    }
}

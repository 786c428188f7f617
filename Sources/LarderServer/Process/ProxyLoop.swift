import Glibc
import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream
import Logging

/// Everything one event loop owns: its client connections, its upstream client (curl multi
/// handle), its in-flight fills, its access-log buffer, and the configuration it currently
/// applies to new requests.
///
/// State: loop-confined; other threads reach it only through jobs on `loop.handle`.
final class ProxyLoop {
    /// Strong; the loop's `context` points back here until shutdown clears it.
    let loop: EventLoop
    /// The services this loop's parts use, taken from ``SharedState`` (docs/ARCHITECTURE.md,
    /// "Services"); the parts reach them through the loop they run on.
    let process: ProcessState
    let storage: Storage
    /// ``Storage/cache``, held here for the lookup on every request.
    let cache: TieredCache
    let telemetry: Telemetry
    let forwarding: Forwarding
    let tunnelling: Tunnelling
    private(set) var runtime: RuntimeConfig
    let upstream: UpstreamClient
    let accessLog: AccessLog
    /// The request side of this loop: what a connection hands each parsed request to.
    let pipeline: RequestPipeline
    /// Attach-or-start for this loop's fetches (the pipeline's).
    var coalescer: Coalescer { pipeline.coalescer }
    /// Each client's fills in flight to each origin on this loop.
    var upstreamShares = UpstreamShares()
    /// Fills whose transfers are paused for their clients, keeping their connections.
    var heldTransfers = HeldTransfers<Fill>()
    /// The warning for a client's download cut for others, once a second at most.
    var cutWarnings = LogThrottle()
    /// Lines about refused proxy authentication, once a second at most.
    var authWarnings = LogThrottle()
    /// The warning for a connection closed to admit another client's, once a second at most.
    var fairnessWarnings = LogThrottle()
    /// The look, every ``waitsLookInterval`` while requests wait for a connection, at which
    /// transfers give theirs up (``yieldConnection(to:)``).
    private var waitsLook: EventLoop.TimerToken?
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    /// Each client address's proxy connections and tunnels on this loop, oldest first
    /// (``makeRoom(for:)``).
    private var byClient: [ClientAddress: [ObjectIdentifier]] = [:]
    /// CONNECT tunnels; each still counts as an active connection.
    private var tunnels: [ObjectIdentifier: Tunnel] = [:]
    private var listeners: [Listener] = []
    private var sweepInterval: UInt64 = 250_000_000
    /// The daemon's life as this loop last heard it from ``Server`` (a loop-confined copy).
    private(set) var life: ServerLife = .running
    private var parked: [Int: ClientConnection] = [:]
    /// Connections as they turn idle, oldest first: at max_connections the oldest idle one
    /// makes room for a new client, so idle connections (a flood of them, or a pool of
    /// keep-alives) can never lock out clients with work to do. Entries whose connection has
    /// moved on are skipped (their stamp no longer matches).
    private var idleQueue: [(id: ObjectIdentifier, stamp: UInt64)] = []
    private var idleHead = 0
    /// The same for admin connections (a separate budget: ``Listener/maxAdminConnections``).
    private var adminIdleQueue: [(id: ObjectIdentifier, stamp: UInt64)] = []
    private var idleStampCounter: UInt64 = 0
    /// A descriptor held in reserve: when accept fails with EMFILE, closing it lets the
    /// listener take the pending connection and refuse it, instead of being woken for it
    /// in a loop.
    private var spareDescriptor: Int32 = -1
    private var nextParkToken = 0
    /// Where connections write small per-response pieces (``OutputQueue/append(using:capacity:_:)``).
    var scratch: [UInt8] = []
    private var cachedDateSecond = -1
    private var cachedDate = ""
    /// Complete responses the fills on this loop store on disk after its epoll batch.
    let diskStores: DiskStoreQueue
    /// The onboarding page and PAC file as last rendered here (``SetupPageCache``).
    var setupPages = SetupPageCache()
    /// How this loop's timers reach it: a weak reference would slow every retain of the loop on
    /// the request path (``LoopWeak``).
    lazy var weakSelf = LoopWeak(self)

    /// The destination policy for the current configuration, rebuilt on reload and every
    /// ``ProxyLoop/hostAddressRefresh`` so addresses that interfaces gain later count as local.
    /// It holds the configuration it was built for: an identifier alone could be taken by a later
    /// configuration allocated where that one was freed, which would keep the old rules.
    private var destinations: (policy: DestinationPolicy, runtime: RuntimeConfig, built: UInt64)?
    static let hostAddressRefresh: UInt64 = 10_000_000_000

    /// Bumped each time the policy is rebuilt: verdicts cached by connections name it.
    private(set) var destinationGeneration = 0

    /// The policy requests under `runtime` are checked against.
    func destinationPolicy(_ runtime: RuntimeConfig) -> DestinationPolicy {
        refreshDestinations(runtime)
        return destinations!.policy
    }

    /// Rebuilds the policy if `runtime` is not the one it was built for or the host's addresses
    /// are due to be read again; returns the generation in force.
    @discardableResult
    func refreshDestinations(_ runtime: RuntimeConfig) -> Int {
        let now = loop.now
        if let destinations, destinations.runtime === runtime, now &- destinations.built < ProxyLoop.hostAddressRefresh {
            return destinationGeneration
        }
        let policy = DestinationPolicy(
            config: runtime.config.proxy, own: process.ownAddresses.withLock { $0 }, hostAddresses: HostAddresses.current())
        destinations = (policy, runtime, now)
        destinationGeneration += 1
        return destinationGeneration
    }

    init(loop: EventLoop, shared: SharedState, runtime: RuntimeConfig) {
        self.loop = loop
        process = shared.process
        storage = shared.storage
        cache = shared.storage.cache
        telemetry = shared.telemetry
        forwarding = shared.forwarding
        tunnelling = shared.tunnelling
        self.runtime = runtime
        upstream = UpstreamClient(loop: loop, maxConnectionsPerHost: runtime.config.upstream.maxConnectionsPerHost)
        accessLog = AccessLog(loop: loop, fd: telemetry.accessLogFile.fd, enabled: runtime.config.log.access)
        pipeline = RequestPipeline(loop: loop, fills: forwarding.fills)
        diskStores = DiskStoreQueue(cache: cache, loop: loop)
        loop.busyPollCounters = (telemetry.stats[.busyPollsCaught], telemetry.stats[.busyPollsExpired])
        upstream.idleConnectionClosed = { [telemetry, logger = shared.process.logger] reason, origin in
            telemetry.stats.idleUpstreamClosed[reason.rawValue]?.add(1)
            // Bytes on an idle plain-HTTP connection are the origin's fault; a close, or a TLS
            // record (usually close_notify), is routine.
            let message: Logger.Message =
                reason == .data
                ? "closed an idle upstream connection: bytes arrived that no request asked for (discarded unread)"
                : "closed an idle upstream connection the origin had closed"
            let level: Logger.Level = reason == .data && origin.hasPrefix("http:") ? .info : .debug
            logger.log(level: level, message, metadata: ["origin": "\(origin)"])
        }
        // The settings a reload may change, set as a reload sets them.
        apply(runtime)
        scheduleSweep()
        reserveSpareDescriptor()
    }

    deinit {
        weakSelf.clear()
    }

    func reserveSpareDescriptor() {
        guard spareDescriptor < 0 else { return }
        spareDescriptor = (try? Syscall.call("open") { open("/dev/null", O_RDONLY | O_CLOEXEC) }) ?? -1
    }

    /// Whether a spare descriptor is held.
    var holdsSpareDescriptor: Bool { spareDescriptor >= 0 }

    /// Closes the spare descriptor; false if there was none.
    func releaseSpareDescriptor() -> Bool {
        guard spareDescriptor >= 0 else { return false }
        Glibc.close(spareDescriptor)
        spareDescriptor = -1
        return true
    }

    var logger: Logger { process.logger }
    var connectionCount: Int { connections.count }
    /// Read for every response head: a match on the case, not the enum's `==`.
    var isDraining: Bool {
        if case .running = life { return false }
        return true
    }

    /// Starts accepting on `socket`.
    func listen(on socket: Socket, kind: Listener.Kind) throws(SystemError) {
        let listener = Listener(socket: socket, kind: kind, proxy: self)
        try loop.register(socket.fd, interest: .readable, handler: listener, exclusive: true)
        listeners.append(listener)
    }

    /// Applies a new configuration to requests that start from now on.
    func apply(_ newRuntime: RuntimeConfig) {
        let usersChanged = newRuntime.config.proxy.authUsers != runtime.config.proxy.authUsers
        runtime = newRuntime
        if usersChanged { closeRevoked(users: newRuntime.config.proxy.authUsers) }
        setupPages.removeAll()
        upstream.setMaxConnectionsPerHost(newRuntime.config.upstream.maxConnectionsPerHost)
        upstream.setResolve(newRuntime.config.upstream.resolve.map(\.curlForm))
        accessLog.enabled = newRuntime.config.log.access
        accessLog.format = newRuntime.config.log.accessFormat
        accessLog.redaction = newRuntime.config.log.redactQuery
        loop.busyPollNanos = newRuntime.config.proxy.busyPoll.totalNanoseconds
        // A larger share lets requests already waiting for theirs go on, on the next pass.
        let waiting = upstreamShares.waitingTargets
        if !waiting.isEmpty { loop.enqueueDeferred { [self] in for target in waiting { resumeWaiting(for: target) } } }
    }

    /// Closes the tunnels and intercepted sessions let in as a user `users` no longer lets in
    /// (changed or removed by a reload, or none while authentication is now on): their bytes
    /// and requests carry no credentials of their own to check again.
    private func closeRevoked(users: [ProxyUser]) {
        var closed = 0
        for tunnel in Array(tunnels.values) where !ProxyAuthenticator.isCurrent(tunnel.user, users: users) {
            tunnel.close(reason: .revoked)
            closed += 1
        }
        for connection in Array(connections.values)
        where connection.interception != nil && !ProxyAuthenticator.isCurrent(connection.authenticatedUser, users: users) {
            connection.close()
            closed += 1
        }
        if closed > 0 {
            logger.notice(
                "closed tunnels and intercepted sessions whose user the reload changed or removed", metadata: ["closed": "\(closed)"])
        }
    }

    /// Stops accepting; open connections finish their current exchange and close.
    func beginDraining(_ stage: ServerLife) {
        life = stage
        for listener in listeners { loop.deregister(listener.socket.fd) }
        listeners.removeAll()
        for connection in connections.values { connection.drain() }
    }

    /// Closes every connection at once (the drain timeout passed).
    func closeAll() {
        for connection in Array(connections.values) { connection.close() }
        for tunnel in Array(tunnels.values) { tunnel.close(reason: .shutdown) }
        accessLog.flush()
    }

    // MARK: Connections

    func adopt(_ socket: Socket, peer: SocketAddress?, kind: Listener.Kind) {
        guard let connection = watch(socket, peer: peer, kind: kind) else { return }
        connection.start(now: loop.now)
    }

    /// Takes over a connection another loop moved here to join this loop's fill.
    func adopt(_ moved: MovedConnection) {
        guard let connection = watch(moved.socket, peer: moved.peer, kind: moved.kind) else { return }
        connection.resume(moved)
    }

    private func watch(_ socket: Socket, peer: SocketAddress?, kind: Listener.Kind) -> ClientConnection? {
        let connection = ClientConnection(socket: socket, peer: peer, kind: kind, proxy: self)
        do {
            try loop.register(socket.fd, interest: .readable, handler: connection)
        } catch {
            logger.error("cannot watch accepted connection", metadata: ["error": "\(error)"])
            socket.close()
            return nil
        }
        connections[ObjectIdentifier(connection)] = connection
        counter(for: kind).add(1)
        if kind == .proxy { countIn(ObjectIdentifier(connection), connection.shareClient.map(ClientAddress.init(words:))) }
        return connection
    }

    private func countIn(_ id: ObjectIdentifier, _ client: ClientAddress?) {
        guard let client else { return }
        byClient[client, default: []].append(id)
        process.clientConnections.withLock { $0[client, default: 0] += 1 }
    }

    private func countOut(_ id: ObjectIdentifier, _ client: ClientAddress?) {
        guard let client, var ids = byClient.removeValue(forKey: client) else { return }
        let before = ids.count
        ids.removeAll { $0 == id }
        if !ids.isEmpty { byClient[client] = ids }
        guard ids.count < before else { return }
        process.clientConnections.withLock { counts in
            let left = (counts[client] ?? 1) - 1
            counts[client] = left > 0 ? left : nil
        }
    }

    /// At `max_connections` with no connection idle: closes one of a client address holding
    /// at least two more connections and tunnels than `peer`'s, counted over every loop
    /// (`ProcessState.clientConnections`), so that one client reconnecting (slow heads,
    /// tunnels, requests left waiting) cannot keep every other client out (review 117). Only
    /// what cuts nothing its client is receiving is taken, of this loop's, from the client
    /// holding the most first: a connection not answering a request (one reading a head, or
    /// waiting for one) whose last response has reached the client, then a tunnel, then a
    /// request, that moved nothing for ``quietBeforeTaken`` (``ClientConnection/isQuiet(now:for:)``,
    /// ``Tunnel/isQuiet(now:for:)``). Work that moves is taken only from a client holding more
    /// than half of all connections (its oldest tunnel here, then its oldest connection): many
    /// addresses, each holding none, could otherwise cut a busy client's downloads one by one
    /// (reviews 119, 121), while one client trickling a byte now and then through every tunnel
    /// would keep the rest out. Returns false (the newcomer is refused) when nothing may be
    /// taken among the first ``looksPerNewcomer`` looked at.
    func makeRoom(for peer: SocketAddress?) -> Bool {
        let (own, held) = process.clientConnections.withLock { counts in
            (ClientAddress(peer).flatMap { counts[$0] } ?? 0, byClient.keys.map { ($0, counts[$0] ?? 0) })
        }
        let holders = held.filter { $0.1 >= own + 2 }.sorted { $0.1 > $1.1 }
        guard let busiest = holders.first else { return false }
        let now = loop.now
        let quiet = Self.quietBeforeTaken
        // Each look may ask a socket what it has not delivered: a bounded number per newcomer,
        // however many connections the holders have.
        var looks = Self.looksPerNewcomer
        search: for (client, _) in holders {
            guard let ids = byClient[client] else { continue }
            for pass in 0..<3 {
                for id in ids {
                    guard looks > 0 else { break search }
                    looks -= 1
                    switch pass {
                    case 0:
                        if let connection = connections[id], !connection.isExchanging, connection.isQuiet(now: now, for: quiet) {
                            return takeRoom(closing: { connection.close() }, from: client)
                        }
                    case 1:
                        if let tunnel = tunnels[id], tunnel.isQuiet(now: now, for: quiet) {
                            return takeRoom(closing: { tunnel.close(reason: .evicted) }, from: client)
                        }
                    default:
                        if let connection = connections[id], connection.isExchanging, connection.isQuiet(now: now, for: quiet) {
                            return takeRoom(closing: { connection.close() }, from: client)
                        }
                    }
                }
            }
        }
        guard 2 * busiest.1 > telemetry.stats[.activeConnections].load(), let ids = byClient[busiest.0] else { return false }
        if let tunnel = ids.lazy.compactMap({ self.tunnels[$0] }).first {
            return takeRoom(closing: { tunnel.close(reason: .evicted) }, from: busiest.0)
        }
        if let connection = ids.lazy.compactMap({ self.connections[$0] }).first {
            return takeRoom(closing: { connection.close() }, from: busiest.0)
        }
        return false
    }

    /// How long a tunnel or a request must have moved nothing to be taken from a client
    /// holding no more than half of all connections (``makeRoom(for:)``).
    static let quietBeforeTaken: UInt64 = 5_000_000_000
    /// Connections and tunnels looked at (three passes over each holder's) for one newcomer
    /// before it is refused.
    static let looksPerNewcomer = 1024

    private func takeRoom(closing close: () -> Void, from client: ClientAddress) -> Bool {
        close()
        telemetry.stats[.connectionsTakenForOthers].add(1)
        if let left = fairnessWarnings.allow(now: loop.now) {
            logger.warning(
                "max_connections reached: closed a connection of a client holding two more to admit another",
                metadata: [
                    "client": "\(UpstreamShares.Key(client: (client.high, client.low), host: "", port: 0).clientAddress)",
                    "left_out": "\(left)",
                ])
        }
        return true
    }

    /// Records that `connection` turned idle; returns the stamp of this idle spell.
    func noteIdle(_ connection: ClientConnection) -> UInt64 {
        idleStampCounter &+= 1
        if connection.kind == .admin {
            adminIdleQueue.append((ObjectIdentifier(connection), idleStampCounter))
            // At most 64 admin connections: stale entries are dropped in bulk now and then.
            if adminIdleQueue.count > 4 * Listener.maxAdminConnections {
                adminIdleQueue = adminIdleQueue.filter { entry in
                    connections[entry.id]?.isEvictable(stamp: entry.stamp) == true
                }
            }
            return idleStampCounter
        }
        let id = ObjectIdentifier(connection)
        if idleHead < idleQueue.count, idleQueue[idleQueue.count - 1].id == id {
            // Idle again before any other connection was: its entry is still the newest and
            // keeps its place, stamped anew, instead of leaving a stale one behind.
            idleQueue[idleQueue.count - 1].stamp = idleStampCounter
        } else {
            idleQueue.append((id, idleStampCounter))
            // Stale entries are dropped as the queue grows, by the work that grew it.
            if idleQueue.count - idleHead > 2 * connections.count + 1024 { compactIdleQueue() }
        }
        return idleStampCounter
    }

    /// Closes this loop's longest-idle admin connection, so that scrapers and health checks
    /// are not locked out by connections left open. Returns false if none is idle.
    func evictIdleAdminConnection() -> Bool {
        while !adminIdleQueue.isEmpty {
            let entry = adminIdleQueue.removeFirst()
            guard let connection = connections[entry.id], connection.isEvictable(stamp: entry.stamp),
                !connection.isFlushingWhileIdle
            else { continue }
            telemetry.stats[.evictedIdleConnections].add(1)
            connection.close()
            return true
        }
        return false
    }

    /// Closes this loop's longest-idle connection to make room. Returns false if none is idle.
    func evictIdleConnection() -> Bool {
        var requeued: [(id: ObjectIdentifier, stamp: UInt64)] = []
        defer { idleQueue.append(contentsOf: requeued) }
        while idleHead < idleQueue.count {
            let entry = idleQueue[idleHead]
            idleHead += 1
            guard let connection = connections[entry.id] else { continue }
            if connection.isEvictable(stamp: entry.stamp) {
                if connection.isFlushingWhileIdle {
                    // Still writing its last response: not yet, keep it in line.
                    requeued.append(entry)
                    continue
                }
                telemetry.stats[.evictedIdleConnections].add(1)
                connection.close()
                compactIdleQueue()
                return true
            }
        }
        compactIdleQueue()
        return false
    }

    /// Drops consumed and stale entries so the queue stays proportional to the connections.
    private func compactIdleQueue() {
        if idleHead > 1024 && idleHead * 2 > idleQueue.count {
            idleQueue.removeFirst(idleHead)
            idleHead = 0
        }
        if idleQueue.count - idleHead > 2 * connections.count + 1024 {
            idleQueue = idleQueue[idleHead...].filter { entry in
                connections[entry.id].map { $0.idleStamp == entry.stamp } ?? false
            }
            idleHead = 0
        }
    }

    /// How often the loop looks at its origins' queues while requests wait: a transfer paused
    /// or a request waiting past ``HeldTransfers/holdLimit`` is acted on within this.
    static var waitsLookInterval: UInt64 { HeldTransfers<Fill>.holdLimit / 5 }

    /// Looks at the origins requests wait for every ``waitsLookInterval`` until none is
    /// waited for (one timer for the loop, not one per paused transfer or waiting request):
    /// answers the requests that waited `upstream.timeout`, then frees connections.
    func watchWaits() {
        guard waitsLook == nil else { return }
        waitsLook = loop.schedule(afterNanos: Self.waitsLookInterval) { [weak self] in
            guard let self else { return }
            waitsLook = nil
            for timeOut in upstreamShares.expired(now: loop.now) { timeOut() }
            let targets = upstreamShares.waitingTargets
            guard !targets.isEmpty else { return }
            lookAtWaits(targets)
            watchWaits()
        }
    }

    /// Frees connections to the origins `targets` for requests that wait for one: transfers
    /// paused too long (``yieldConnection(to:)``), then, for an origin where a request has
    /// waited ``HeldTransfers/holdLimit`` and still no connection would be free, one running
    /// transfer of a client holding at least two more fills to it than the waiting client
    /// holding the fewest (``HeldTransfers/overShare(_:fewest:now:held:anyRate:)``). The loop's
    /// transfers are walked once, and only when some origin needs it.
    private func lookAtWaits(_ targets: [Int]) {
        var short: [Int: (fewest: Int, anyRate: Bool)] = [:]
        let now = loop.now
        let floor = HeldTransfers<Fill>.fairnessFloor(timeout: UInt64(runtime.config.upstream.timeout.totalNanoseconds))
        for target in targets {
            guard let fewest = yieldConnection(to: target) else { continue }
            let waitedLong = now >= floor ? upstreamShares.fewestHeld(waitingSince: now - floor, target: target, share: shareLimit) : nil
            short[target] = waitedLong.map { ($0, true) } ?? (fewest, false)
        }
        guard !short.isEmpty else { return }
        var running: [Int: [HeldTransfers<Fill>.Running]] = [:]
        for case let fill as Fill in upstream.activeDelegates where !fill.hasEnded {
            guard let share = fill.share, short[share.target] != nil else { continue }
            let moved = fill.received + fill.requestBodySent
            running[share.target, default: []].append(
                .init(holder: fill, share: share, began: fill.began, readers: fill.readerCount, received: moved))
        }
        for (target, need) in short {
            guard let transfers = running[target],
                let fill = HeldTransfers.overShare(
                    transfers, fewest: need.fewest, now: now, held: { upstreamShares.count($0) }, anyRate: need.anyRate)
            else { continue }
            telemetry.stats[.overShareCuts].add(1)
            fill.giveUpConnection(.overShare)
        }
    }

    /// Cuts transfers to the origin `target` paused ``HeldTransfers/holdLimit`` for their
    /// clients, one for each request waiting for a connection to it that no free connection
    /// serves (``HeldTransfers``). Then, if such requests remain and one of them has waited
    /// that long: the fewest fills a client with a request waiting that long holds to the
    /// origin (nil: nothing more to do).
    @discardableResult
    func yieldConnection(to target: Int) -> Int? {
        // Counted once (a walk of the origin's waiters): each cut frees one more connection.
        let waiting = upstreamShares.eligibleWaiters(target: target, share: shareLimit)
        var free = perHostLimit - upstreamShares.inFlight(target: target)
        guard waiting > free else { return nil }
        let now = loop.now
        heldTransfers.measure(target: target, now: now) { $0.slowestDelivered() }
        var listed = heldTransfers.count(target: target)
        while listed > 0,
            let fill = heldTransfers.toCut(target: target, waiting: waiting, free: free, now: now, held: { upstreamShares.count($0) })
        {
            listed -= 1
            free += 1
            telemetry.stats[.slowClientCuts].add(1)
            fill.giveUpConnection(.heldConnection)
        }
        guard waiting > free, now >= HeldTransfers<Fill>.holdLimit else { return nil }
        return upstreamShares.fewestHeld(waitingSince: now - HeldTransfers<Fill>.holdLimit, target: target, share: shareLimit)
    }

    /// Gives back a fill's share of its origin's connections (``UpstreamShares``) and, on the
    /// next pass, lets requests waiting for that origin go on while it has room.
    func giveShare(_ key: UpstreamShares.Key) {
        guard upstreamShares.give(key) else { return }
        loop.enqueueDeferred { [self] in resumeWaiting(for: key.target) }
    }

    /// `upstream.max_connections_per_host` as this loop has it now.
    var perHostLimit: Int { runtime.config.upstream.maxConnectionsPerHost }

    /// The most fills one client may have in flight to one origin on this loop now: the
    /// loop's configuration decides, for a request begun before a reload too, so that a
    /// request let go on finds the room it was let go for.
    var shareLimit: Int { UpstreamShares.limit(perHost: perHostLimit) }

    /// Lets requests waiting for the origin `target` go on while it has connections free, in
    /// the order ``UpstreamShares/nextWaiting(target:share:perHost:)`` gives; each is asked
    /// once (one that waits again is at the back for the next pass).
    private func resumeWaiting(for target: Int) {
        upstreamShares.handedOver(target: target)
        var asked = upstreamShares.waiters(target: target)
        while asked > 0, let next = upstreamShares.nextWaiting(target: target, share: shareLimit, perHost: perHostLimit) {
            asked -= 1
            _ = next()
        }
    }

    func connectionClosed(_ connection: ClientConnection) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            counter(for: connection.kind).subtract(1)
            if connection.kind == .proxy {
                countOut(ObjectIdentifier(connection), connection.shareClient.map(ClientAddress.init(words:)))
            }
        }
    }

    /// Proxy and admin connections are counted apart: max_connections is about clients, and
    /// an operator's stats call must not take a client's place (or be refused for one).
    private func counter(for kind: Listener.Kind) -> AtomicCounter {
        kind == .proxy ? telemetry.stats[.activeConnections] : telemetry.stats[.adminConnections]
    }

    /// A connection whose socket became a tunnel's (counted until the tunnel closes) or moved
    /// to another loop (counted there).
    func connectionLeft(_ connection: ClientConnection, stillCounted: Bool) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            if !stillCounted { counter(for: connection.kind).subtract(1) }
            if connection.kind == .proxy {
                countOut(ObjectIdentifier(connection), connection.shareClient.map(ClientAddress.init(words:)))
            }
        }
    }

    func adoptTunnel(_ tunnel: Tunnel) {
        tunnels[ObjectIdentifier(tunnel)] = tunnel
        countIn(ObjectIdentifier(tunnel), ClientAddress(tunnel.peer))
        // A reload between its CONNECT's check and now.
        if !ProxyAuthenticator.isCurrent(tunnel.user, users: runtime.config.proxy.authUsers) {
            return tunnel.close(reason: .revoked)
        }
        do {
            try tunnel.start()
        } catch {
            logger.error("cannot watch tunnel sockets", metadata: ["error": "\(error)"])
            tunnel.close(reason: .error)
        }
    }

    func tunnelClosed(_ tunnel: Tunnel) {
        if tunnels.removeValue(forKey: ObjectIdentifier(tunnel)) != nil {
            telemetry.stats[.activeConnections].subtract(1)
            countOut(ObjectIdentifier(tunnel), ClientAddress(tunnel.peer))
        }
    }

    /// Stamps this loop's heartbeat every `interval` (from the loop itself: a wedged loop stops
    /// stamping).
    func startHeartbeat(every interval: UInt64, slot: Int) {
        loop.schedule(afterNanos: interval) { [weakSelf] in
            guard let proxy = weakSelf.object, !proxy.isDraining else { return }
            proxy.process.heartbeats.withLock { beats in
                if slot < beats.count { beats[slot] = proxy.loop.now }
            }
            proxy.startHeartbeat(every: interval, slot: slot)
        }
    }

    /// On loop 0: WATCHDOG=1 at half the watchdog interval while every loop's heartbeat is
    /// recent, and STATUS= every few seconds.
    func startSupervisor(watchdog: UInt64?, status: @escaping () -> String) {
        let period = watchdog.map { max($0 / 2, 10_000_000) } ?? 5_000_000_000
        var sinceStatus: UInt64 = 0
        // `tick` reschedules itself: it captures the loop and the weak reference, never self.
        let loop = self.loop
        let weakSelf = self.weakSelf
        func tick() {
            loop.schedule(afterNanos: period) {
                guard let proxy = weakSelf.object, !proxy.isDraining else { return }
                if let watchdog {
                    let now = Clocks.monotonicNanos()
                    let healthy = proxy.process.heartbeats.withLock { beats in beats.allSatisfy { now &- $0 < watchdog } }
                    if healthy { Systemd.notify("WATCHDOG=1") }
                }
                sinceStatus += period
                if sinceStatus >= 5_000_000_000 {
                    sinceStatus = 0
                    Systemd.notify("STATUS=\(status())")
                }
                tick()
            }
        }
        tick()
    }

    /// Keeps a connection findable while it waits for work on another thread; the job that
    /// resumes it carries only the token (connections never leave their loop).
    func park(_ connection: ClientConnection) -> Int {
        nextParkToken += 1
        parked[nextParkToken] = connection
        return nextParkToken
    }

    func unpark(_ token: Int) -> ClientConnection? {
        parked.removeValue(forKey: token)
    }

    private func scheduleSweep() {
        let config = runtime.config
        let shortest = min(
            config.proxy.headerTimeout.totalNanoseconds, config.proxy.idleTimeout.totalNanoseconds,
            config.coalesce.waitTimeout.totalNanoseconds)
        sweepInterval = max(50_000_000, min(1_000_000_000, shortest / 4))
        loop.schedule(afterNanos: sweepInterval) { [weakSelf] in
            guard let proxy = weakSelf.object else { return }
            let now = proxy.loop.now
            for connection in Array(proxy.connections.values) { connection.checkDeadline(now: now) }
            if !proxy.tunnels.isEmpty {
                let idle = proxy.runtime.config.proxy.tunnelIdleTimeout.totalNanoseconds
                for tunnel in Array(proxy.tunnels.values) { tunnel.checkIdle(now: now, timeout: idle) }
            }
            proxy.coalescer.sweep()
            proxy.cache.expireSliceParts(now: Clocks.wallSeconds())
            proxy.scheduleSweep()
        }
    }

    /// The current time as an HTTP date, formatted once per second.
    var httpDate: String {
        let second = Int(Clocks.wallSeconds())
        if second != cachedDateSecond {
            cachedDateSecond = second
            cachedDate = HTTPDate.format(second)
        }
        return cachedDate
    }

    /// `text` (a URL or a cache key) as a daemon log line may show it: log.redact_query's
    /// values hidden, as in access lines, for the log is read by more people than the client.
    func loggable(_ text: String) -> String {
        runtime.config.log.redactQuery.hiding(text)
    }
}

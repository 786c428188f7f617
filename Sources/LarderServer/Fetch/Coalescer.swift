import LarderHTTP
import LarderIO

/// The fills in flight on one event loop, by key, so that a request for something already
/// being fetched attaches to it instead of going upstream again; and the keys recently seen
/// to carry responses that may not be shared, which are fetched without coalescing for a while
/// (so a burst does not queue behind a response it cannot use — Varnish's hit-for-pass).
///
/// State: loop-confined. Each loop has its own coalescer; with several loops, `registry`
/// says which loop fetches a key, and a request for it moves to that loop
/// (``ClientConnection/moveToFill(on:exchange:)``).
final class Coalescer {
    private var fills: [FillKey: Fill] = [:]
    private var notShareableUntil: [FillKey: UInt64] = [:]
    private let loop: EventLoop
    /// nil with a single loop.
    private let registry: FillRegistry?

    init(loop: EventLoop, registry: FillRegistry?) {
        self.loop = loop
        self.registry = registry
    }

    /// What a request does about the fills in flight, decided from what this loop knows.
    enum Step: Equatable, Sendable {
        /// Read the response of this loop's fill for the key.
        case attach
        /// No fill for the key on this loop: claim the key (another loop may hold it), then
        /// start a fill that later requests attach to.
        case claim
        /// Start a fill that no other request attaches to: no key (the request selects an
        /// answer for itself alone, or its route never coalesces), a key in its not-shareable
        /// period, or a fill that takes no more readers (too late, or `coalesce.max_waiters`).
        case alone
    }

    /// The decision behind ``join(_:maxWaiters:reader:requestHeaders:)``: a pure function, so
    /// every case has a test. `local`: this loop's fill for the key, if any; one that `ended`
    /// is still registered until its pass releases the key, and counts as none, as does one an
    /// operator's purge or ban overtook (it fetches what they removed).
    static func step(
        hasKey: Bool, notShareable: Bool, local: (ended: Bool, acceptsLateReaders: Bool, readerCount: Int)?, maxWaiters: Int
    ) -> Step {
        guard hasKey, !notShareable else { return .alone }
        guard let local, !local.ended else { return .claim }
        return local.acceptsLateReaders && local.readerCount < maxWaiters ? .attach : .alone
    }

    /// What ``join(_:maxWaiters:reader:requestHeaders:)`` did.
    enum Joined {
        /// The reader reads this loop's fill for the key, already in flight.
        case attached(Fill)
        /// Nothing in flight to attach to: the caller builds the fill, registered under
        /// `registeredKey` (claimed for this loop; nil: a fill no other request attaches to),
        /// and starts it with ``start(_:firstReader:requestHeaders:)``.
        case start(registeredKey: FillKey?)
        /// Another loop fetches the key, and nothing was done here: the request moves there if
        /// it can, else starts a fill registered here under the key.
        case elsewhere(EventLoopHandle, FillKey)
    }

    /// Attach-or-claim for every fetch a client waits on, whole objects and slices alike:
    /// attaches `reader` (with its request's headers, for the Vary check) to this loop's fill
    /// for `key`; or claims the key for this loop and answers that the caller starts the fill;
    /// or names the loop fetching the key. The caller builds the fill itself, so control does
    /// not come back out of the coalescer through a builder.
    func join(_ key: FillKey?, maxWaiters: Int, reader: any FillReader, requestHeaders: HTTPHeaders) -> Joined {
        // An empty table is not hashed into: the key's lookup is most of a miss's hashing.
        let local = fills.isEmpty ? nil : key.flatMap { fills[$0] }
        let step = Coalescer.step(
            hasKey: key != nil, notShareable: key.map(isNotShareable) ?? false,
            local: local.map { ($0.hasEnded || $0.wasInvalidated, $0.acceptsLateReaders, $0.readerCount) }, maxWaiters: maxWaiters)
        switch (step, key, local) {
        case (.attach, _, let fill?):
            fill.attach(reader, requestHeaders: requestHeaders)
            return .attached(fill)
        case (.claim, let key?, _):
            if let owner = claimOrFindOtherLoop(key) { return .elsewhere(owner, key) }
            return .start(registeredKey: key)
        default:
            return .start(registeredKey: nil)
        }
    }

    /// Makes `fill` the one requests for its key attach to (with several loops the key was
    /// claimed first, ``claimOrFindOtherLoop(_:)``, or another loop holds it and this fill is
    /// this loop's own) and starts its transfer, with `firstReader` attached (nil: a fetch no
    /// client waits on).
    func start(_ fill: Fill, firstReader: (any FillReader)?, requestHeaders: HTTPHeaders) {
        if let key = fill.coalesceKey { fills[key] = fill }
        fill.start(firstReader: firstReader, requestHeaders: requestHeaders)
    }

    /// The loop already fetching `key`, when that is another loop; otherwise this loop now
    /// counts as fetching it (the caller starts the fill).
    func claimOrFindOtherLoop(_ key: FillKey) -> EventLoopHandle? {
        registry?.claim(key, loop: loop.handle.index)
    }

    /// Whether some loop, this one or another, is fetching `key` (nothing is claimed).
    func isFetched(_ key: FillKey) -> Bool {
        fill(for: key) != nil || registry?.owner(of: key, besides: loop.handle.index) != nil
    }

    /// The fill in flight for `key` (not one that ended and has yet to release it).
    func fill(for key: FillKey) -> Fill? {
        guard let fill = fills[key], !fill.hasEnded else { return nil }
        return fill
    }

    /// Whether `key` is in its not-shareable period.
    func isNotShareable(_ key: FillKey) -> Bool {
        guard !notShareableUntil.isEmpty, let until = notShareableUntil[key] else { return false }
        if loop.now < until { return true }
        notShareableUntil.removeValue(forKey: key)
        return false
    }

    /// Forgets `fill` (finished, failed or cancelled) if it is the one registered: not when a
    /// request claimed the key again after the fill ended (``step(hasKey:notShareable:local:maxWaiters:)``)
    /// and registered a fill of its own.
    func remove(_ fill: Fill) {
        guard let key = fill.coalesceKey, let index = fills.index(forKey: key), fills.values[index] === fill else { return }
        fills.remove(at: index)
        registry?.release(key, loop: loop.handle.index)
    }

    /// Forgets `fill` and fetches its key without coalescing for `ttl`.
    func markNotShareable(_ fill: Fill, ttl: UInt64) {
        remove(fill)
        guard let key = fill.coalesceKey, ttl > 0 else { return }
        notShareableUntil[key] = loop.now &+ ttl
    }

    /// Drops expired not-shareable marks (called from the loop's periodic sweep).
    func sweep() {
        guard !notShareableUntil.isEmpty else { return }
        let now = loop.now
        notShareableUntil = notShareableUntil.filter { $0.value > now }
    }
}

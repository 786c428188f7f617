import Glibc
import LarderIO

/// Which of curl's sockets are registered with the loop, which are parked between transfers,
/// and which are closed because they turned readable while idle. ``UpstreamClient`` (the only
/// file that touches curl) translates curl's CURL_POLL_* into calls here and hears back, as its
/// ``Owner``, the events of the sockets curl watches, which it hands to curl.
///
/// RFC 9112 §9.3 keep-alive: one upstream socket carries transfer after transfer. curl says
/// "remove" when a transfer ends and "watch" when the next starts (two epoll_ctl calls a miss,
/// taken literally); a socket this table opened is instead parked (registered for reading) and
/// reused, and deregistered when curl closes it or it turns readable while parked. curl also
/// says "remove" for a transfer it paused: that socket is still in use.
///
/// State: loop-confined, like its client. Every property is touched only on the owning loop's
/// thread. The owner holds the table; a registered ``SocketWatch`` (which the loop holds) holds
/// both, so neither ends while one of its sockets is registered.
final class UpstreamSockets {
    /// What hears of the sockets curl watches.
    protocol Owner: AnyObject {
        /// `events` on `fd`, a socket curl watches.
        func socketReady(_ fd: Int32, events: IOEvents)
    }

    private let loop: EventLoop
    /// Unretained: it holds the table, and every watch holds it.
    private unowned(unsafe) let owner: any Owner
    /// The sockets curl uses, indexed by descriptor (no hashing on every socket callback).
    private var entries: [Entry] = []
    /// One end of a socket pair whose other end is closed: what an idle connection's
    /// descriptor becomes when it is closed (``closeIdle(_:buffered:)``). Made on first use.
    private var deadSocket: Int32 = -1

    /// Called for each pooled connection closed because it turned readable or closed while
    /// idle, with why and the origin it was opened for.
    var idleConnectionClosed: ((IdleConnectionClose, String) -> Void)?

    /// `own`: opened by ``open(family:type:protocol:origin:)``, so its close is seen and it may
    /// stay registered idle; `origin`: the origin it was opened for, for the log (a connection to
    /// a parent proxy may serve other origins later); `pausedBy`: the paused transfer curl
    /// stopped watching it for.
    private struct Entry {
        var watch: SocketWatch?
        var own = false
        var origin = ""
        weak var pausedBy: AnyObject?
    }

    /// Why curl stopped watching a socket that stays registered.
    private enum Parked {
        /// Watched by curl.
        case no
        /// Its connection is back in curl's pool, idle.
        case idle
        /// Its transfer is paused (Larder's callbacks refused bytes): still in use.
        case paused
    }

    private final class SocketWatch: IOHandler {
        let fd: Int32
        let sockets: UpstreamSockets
        let owner: any Owner
        var parked = Parked.no
        init(fd: Int32, sockets: UpstreamSockets) {
            self.fd = fd
            self.sockets = sockets
            owner = sockets.owner
        }
        func handleIO(_ events: IOEvents) {
            switch parked {
            case .idle:
                sockets.closeIdle(fd)
            case .paused:
                // Its transfer reads the bytes when it resumes (curl watches the socket again),
                // or, if it ends without, its end looks at them (``pausedTransferEnded(on:by:)``).
                sockets.unwatch(fd)
            case .no:
                owner.socketReady(fd, events: events)
            }
        }
    }

    init(loop: EventLoop, owner: any Owner) {
        self.loop = loop
        self.owner = owner
    }

    deinit {
        if deadSocket >= 0 { Syscall.close(deadSocket) }
    }

    // MARK: curl's socket callbacks

    /// CURLOPT_OPENSOCKETFUNCTION's socket, opened here so that its closing is seen (curl makes
    /// it non-blocking itself; close-on-exec is ours). nil if the kernel refused one.
    func open(family: Int32, type: Int32, protocol: Int32, origin: String) -> Int32? {
        let type = type | Int32(SOCK_CLOEXEC.rawValue)
        guard let fd = try? Syscall.call("socket", { socket(family, type, `protocol`) }) else { return nil }
        // The number was free, so a socket still listed under it was closed without a word:
        // libcurl 7.88 closes a socket whose connect timed out itself, not through
        // CURLOPT_CLOSESOCKETFUNCTION. Its registration went with it; kept, it would stand for
        // the new socket, which epoll would then never report.
        forget(fd)
        let index = entryIndex(fd)
        entries[index].own = true
        entries[index].origin = origin
        return fd
    }

    /// CURLOPT_CLOSESOCKETFUNCTION: deregistered and forgotten before the number can be reused.
    func close(_ fd: Int32) {
        forget(fd)
        Syscall.close(fd)
    }

    /// Deregisters `fd` and drops what the table knows of it.
    private func forget(_ fd: Int32) {
        unwatch(fd)
        if Int(fd) < entries.count { entries[Int(fd)] = Entry() }
    }

    /// curl watches `fd` for `interest` (CURL_POLL_IN, _OUT, _INOUT).
    func watch(_ fd: Int32, interest: IOEvents) {
        let index = entryIndex(fd)
        entries[index].pausedBy = nil
        if let watch = entries[index].watch {
            if loop.setInterest(fd, interest) {
                watch.parked = .no
                return
            }
            // Registered for a socket closed behind the table's back whose number this one
            // reuses (see ``open(family:type:protocol:origin:)``): that socket's entry goes.
            forget(fd)
        }
        let watch = SocketWatch(fd: fd, sockets: self)
        do {
            try loop.register(fd, interest: interest, handler: watch)
            entries[index].watch = watch
        } catch {
            // Registration failing leaves curl's own timeout to end the transfer.
        }
    }

    /// curl stops watching `fd` (CURL_POLL_REMOVE), for `pausedTransfer` if that transfer is
    /// paused. A socket of ours stays registered, parked; true if parked for that transfer,
    /// which then hands it to ``pausedTransferEnded(on:by:)`` when it ends: curl says nothing
    /// more of this socket if the transfer ends without reading from it again (its last bytes
    /// were the ones it paused on).
    func stopWatching(_ fd: Int32, pausedTransfer: AnyObject?) -> Bool {
        let index = entryIndex(fd)
        guard let watch = entries[index].watch else { return false }
        guard entries[index].own else {
            unwatch(fd)
            return false
        }
        // Closed behind the table's back (see ``open(family:type:protocol:origin:)``): nothing
        // left to park.
        guard loop.setInterest(fd, .readable) else {
            forget(fd)
            return false
        }
        guard let pausedTransfer else {
            watch.parked = .idle
            return false
        }
        watch.parked = .paused
        entries[index].pausedBy = pausedTransfer
        return true
    }

    private func unwatch(_ fd: Int32) {
        guard Int(fd) < entries.count, entries[Int(fd)].watch != nil else { return }
        entries[Int(fd)].watch = nil
        loop.deregister(fd)
    }

    /// `fd`'s entry, which the table grows to hold (curl passes only open sockets).
    private func entryIndex(_ fd: Int32) -> Int {
        if Int(fd) >= entries.count { entries += repeatElement(Entry(), count: Int(fd) + 1 - entries.count) }
        return Int(fd)
    }

    // MARK: Idle connections

    /// A transfer that ended while paused (its last bytes were refused, then taken on resume)
    /// gets no word from curl for its socket after the "remove" that paused it: it is idle from
    /// now on, and bytes that came while it was paused are no answer to anything. Nothing to do
    /// unless `fd` is still marked by `transfer`: curl neither closed it (``close(_:)`` clears
    /// the entry) nor ran another transfer on it (``watch(_:interest:)`` clears the mark).
    func pausedTransferEnded(on fd: Int32, by transfer: AnyObject) {
        guard Int(fd) < entries.count, entries[Int(fd)].pausedBy === transfer else { return }
        let index = Int(fd)
        entries[index].pausedBy = nil
        if let watch = entries[index].watch {
            watch.parked = .idle
            loop.setInterest(fd, .readable)
        } else {
            // Unwatched when bytes arrived while it was paused.
            let watch = SocketWatch(fd: fd, sockets: self)
            watch.parked = .idle
            if (try? loop.register(fd, interest: .readable, handler: watch)) != nil { entries[index].watch = watch }
        }
        // Now rather than at the loop's next look: another transfer may pick it first.
        if Self.isReadable(fd) { closeIdle(fd) }
    }

    /// Whether `fd` is ours and parked idle in curl's pool: not already closed as idle, nor
    /// running another transfer.
    func isParkedIdle(_ fd: Int32) -> Bool {
        Int(fd) < entries.count && entries[Int(fd)].own && entries[Int(fd)].watch?.parked == .idle
    }

    /// Whether `transfer`, paused on `fd`, left it with bytes (or a close) behind the body it
    /// has now taken whole.
    func bytesBehindPausedBody(on fd: Int32, of transfer: AnyObject) -> Bool {
        guard Int(fd) < entries.count, entries[Int(fd)].pausedBy === transfer else { return false }
        return Self.isReadable(fd)
    }

    /// Whether `fd` has bytes to read, or its peer closed it, right now.
    private static func isReadable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents != 0
    }

    /// A pooled connection that turned readable, or closed, while idle (RFC 9112 §9.3: a
    /// response belongs to the request it follows, and no request was outstanding): whatever
    /// it carries is no answer to any request. libcurl 7.88 judges a pooled connection alive
    /// when it has unread bytes, and would take them as the response to the next request it
    /// sends there. The descriptor is replaced in place by one end of a socket pair whose other
    /// end is closed, which shuts the origin's connection and leaves curl a socket at EOF: its
    /// liveness check then finds the connection dead and closes it (through ``close(_:)``),
    /// and the next transfer connects afresh. If curl picked the connection anyway, its first
    /// write fails on a reused connection, which curl sends again on a new one.
    /// `buffered`: TLS bytes already read off the socket were left unread.
    func closeIdle(_ fd: Int32, buffered: Bool = false) {
        unwatch(fd)
        // Bytes, rather than a plain close, are the origin's fault (or TLS records on https).
        var byte: UInt8 = 0
        let peeked = (try? Syscall.nonBlocking("recv") { recv(fd, &byte, 1, Int32(MSG_PEEK)) }) ?? nil
        let reason: IdleConnectionClose = buffered || (peeked ?? 0) > 0 ? .data : .closed
        if deadSocket < 0 {
            var pair: [Int32] = [-1, -1]
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            if (try? Syscall.call("socketpair") { socketpair(AF_UNIX, type, 0, &pair) }) != nil {
                Syscall.close(pair[1])
                deadSocket = pair[0]
            }
        }
        // dup3 closes the origin's socket and reuses its number: curl's descriptor stays valid.
        if deadSocket < 0 || (try? FileSystem.replaceDescriptor(fd, with: deadSocket)) == nil {
            // Without a dead socket, it is left for curl's own check.
            return
        }
        idleConnectionClosed?(reason, entries[Int(fd)].origin)
    }
}

import CCurl
import Glibc
import LarderHTTP
import LarderIO
import LarderTLS

// This file and EasyHandle.swift are Larder's only contact with libcurl: no CURL* type or
// curl_* call appears anywhere else. This one drives curl's multi interface from an EventLoop (curl tells us which
// sockets and timeouts to watch, we tell curl when they are ready), so upstream I/O shares
// the loop thread with the client connections and needs no locks or thread hops.

/// The upstream side of one event loop: a libcurl multi handle whose sockets and timer are
/// watched by that loop. Connections to origins are pooled in the multi handle and reused.
///
/// State: loop-confined. Every property is touched only on the owning loop's thread, including
/// from curl's callbacks, which curl invokes only from inside `curl_multi_socket_action`.
public final class UpstreamClient: UpstreamSockets.Owner {
    private let multi: UnsafeMutableRawPointer
    let loop: EventLoop
    /// curl's sockets: which are registered with the loop, parked, or closed while idle.
    private lazy var sockets = UpstreamSockets(loop: loop, owner: self)
    var timer: EventLoop.TimerToken?
    /// curl asked for its timeout to run now (in this iteration's deferred pass); cleared when
    /// it replaces that timeout, so a superseded "run now" does nothing.
    var timeoutNowRequested = false
    /// `runTimeoutNow` is queued in the loop's deferred pass.
    var timeoutNowQueued = false
    /// How the closures this client queues on its loop reach it: not a weak reference, which
    /// would slow every retain of the client on the request path (``LoopWeak``).
    private lazy var weakSelf = LoopWeak(self)
    /// The timer callbacks, built once: curl resets its timeout several times per transfer, and
    /// a fresh closure each time is an allocation each time.
    lazy var runTimeoutNow: () -> Void = { [weakSelf] in
        guard let client = weakSelf.object else { return }
        client.timeoutNowQueued = false
        guard client.timeoutNowRequested else { return }
        client.timeoutNowRequested = false
        client.socketAction(CURL_SOCKET_TIMEOUT, 0)
    }
    /// Completed transfers are read from curl in the loop's deferred pass, after the clients'
    /// work their callbacks queued: a transfer's bytes reach its clients before its end is
    /// processed (the memory-tier insert, the coalescer, the handle recycled).
    private var drainQueued = false
    private lazy var drainLater: () -> Void = { [weakSelf] in
        guard let client = weakSelf.object else { return }
        client.drainQueued = false
        client.drainMessages()
    }
    lazy var timerFired: () -> Void = { [weakSelf] in
        guard let client = weakSelf.object else { return }
        client.timer = nil
        client.socketAction(CURL_SOCKET_TIMEOUT, 0)
    }
    /// Transfers in flight, each in its ``UpstreamTransfer/slot``, which its handle's
    /// CURLOPT_PRIVATE names: a finished transfer is found by index, then checked.
    private var active = Slots<UpstreamTransfer>()
    private var spareHandles: [EasyHandle] = []
    /// Set while curl is running one of our callbacks; removing a handle then is not allowed.
    var inCallback = 0

    /// Called (on the loop) for each pooled connection closed because it turned readable or
    /// closed while idle, with why and the origin it was opened for.
    public var idleConnectionClosed: ((IdleConnectionClose, String) -> Void)? {
        get { sockets.idleConnectionClosed }
        set { sockets.idleConnectionClosed = newValue }
    }

    private static let globalInit: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    /// Creates the client for `loop`; call on that loop's thread.
    public init(loop: EventLoop, maxConnectionsPerHost: Int) {
        precondition(UpstreamClient.globalInit, "curl_global_init failed")
        guard let handle = curl_multi_init() else { fatalError("curl_multi_init failed") }
        multi = handle
        self.loop = loop
        let me = Unmanaged.passUnretained(self).toOpaque()
        larder_multi_set_socket_callback(multi) { easy, fd, what, userp, _ in
            let client = Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue()
            client.watch(fd: fd, what: what, easy: easy)
            return 0
        }
        larder_multi_set_pointer(multi, CURLMOPT_SOCKETDATA, me)
        larder_multi_set_timer_callback(multi) { _, timeoutMS, userp in
            let client = Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue()
            client.setTimer(milliseconds: timeoutMS)
            return 0
        }
        larder_multi_set_pointer(multi, CURLMOPT_TIMERDATA, me)
        setMaxConnectionsPerHost(maxConnectionsPerHost)
        larder_multi_set_long(multi, CURLMOPT_MAXCONNECTS, 1024)
    }

    deinit {
        weakSelf.clear()
        for transfer in active.values { transfer.detachFromCurl() }
        curl_multi_cleanup(multi)
        for list in retiredResolveLists + [resolveList].compactMap({ $0 }) { curl_slist_free_all(list) }
    }

    /// `upstream.resolve` as curl's CURLOPT_RESOLVE list, set on every transfer. curl reads it
    /// when a transfer starts, into the multi handle's DNS cache; a list replaced by a reload
    /// is kept until the client ends, since a transfer set up earlier may not have started.
    private(set) var resolveList: UnsafeMutablePointer<curl_slist>?
    private var retiredResolveLists: [UnsafeMutablePointer<curl_slist>] = []
    private var resolveEntries: [String] = []

    /// Pins host names to addresses (`"host:port:address[,address]"`); a pin dropped since the
    /// last call is removed from curl's DNS cache (`-host:port`).
    public func setResolve(_ entries: [String]) {
        guard entries != resolveEntries else { return }
        let pin = { (entry: String) in String(entry[..<entry.lastIndex(of: ":")!]) }
        let pins = entries.map(pin)
        var list: UnsafeMutablePointer<curl_slist>?
        for dropped in resolveEntries.map(pin) where !pins.contains(dropped) { list = curl_slist_append(list, "-" + dropped) }
        for entry in entries { list = curl_slist_append(list, entry) }
        if let old = resolveList { retiredResolveLists.append(old) }
        resolveList = list
        resolveEntries = entries
    }

    /// Limits concurrent connections to one origin; further transfers queue inside curl.
    public func setMaxConnectionsPerHost(_ count: Int) {
        larder_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, count))
    }

    /// The delegates of the transfers in flight, in no particular order: a walk for a rare
    /// decision (which transfer gives its connection up), not for every request.
    public var activeDelegates: [any UpstreamTransferDelegate] { active.values.compactMap(\.delegate) }

    /// Starts a transfer; events go to `delegate` on this loop.
    public func start(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> UpstreamTransfer {
        let handle = spareHandles.popLast() ?? EasyHandle(client: self)
        let transfer = UpstreamTransfer(client: self, handle: handle, request: request, delegate: delegate)
        let slot = active.insert(transfer)
        transfer.slot = slot
        let code = transfer.configure(slot: slot, request: request) ? curl_multi_add_handle(multi, handle.pointer) : nil
        if code != CURLM_OK {
            let message =
                code.map { String(cString: curl_multi_strerror($0)) }
                ?? "curl refused the URL (a byte in its host or path cannot go out as it is)"
            loop.enqueueDeferred { [weakSelf] in
                weakSelf.object?.finish(transfer, error: UpstreamError(kind: .other, message: message, afterHead: false))
            }
        }
        transfer.armTimeout(now: loop.now)
        return transfer
    }

    // MARK: curl → loop

    // curl's CURL_POLL_* as the loop's interest; `easy` is the transfer curl says it for.
    private func watch(fd: Int32, what: Int32, easy: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            let transfer = easy.flatMap { activeTransfer($0) }
            let paused = transfer.flatMap { $0.receivePaused || $0.sendPaused ? $0 : nil }
            if sockets.stopWatching(fd, pausedTransfer: paused) { paused?.pausedSocket = fd }
            return
        }
        var interest: IOEvents = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { interest.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { interest.insert(.writable) }
        sockets.watch(fd, interest: interest)
    }

    /// CURLOPT_OPENSOCKETFUNCTION: the address about to be connected to passes the transfer's
    /// destination check first; the socket is made by the table, which sees it closed.
    func openSocket(for transfer: UpstreamTransfer, address: SocketAddress?, family: Int32, type: Int32, protocol: Int32)
        -> Int32
    {
        if !transfer.mayConnect(to: address) { return CURL_SOCKET_BAD }
        return sockets.open(family: family, type: type, protocol: `protocol`, origin: transfer.connectionOrigin) ?? CURL_SOCKET_BAD
    }

    /// The connection `transfer` ran on, once the transfer is out of curl, if curl keeps it in
    /// its pool. Two things the socket's readiness cannot show are looked at here:
    /// - A transfer that ended while paused (``UpstreamSockets/pausedTransferEnded(on:by:)``).
    /// - On TLS, curl reads a body only up to its end, so a response sent in the same record
    ///   right behind it stays in OpenSSL's buffer, off the socket; libcurl 7.88's liveness
    ///   check peeks at the socket alone and would read it as the next request's response.
    private func inspectConnection(after transfer: UpstreamTransfer) {
        if let fd = transfer.pausedSocket { sockets.pausedTransferEnded(on: fd, by: transfer) }
        // The session is that connection's while curl keeps it (``keptConnection``).
        guard let session = transfer.tlsSession, let fd = transfer.keptConnection, sockets.isParkedIdle(fd),
            OpenSSL.sessionHasPendingBytes(session)
        else { return }
        sockets.closeIdle(fd, buffered: true)
    }

    /// Whether `transfer`, paused, left its socket with bytes (or a close) behind the body it
    /// has now taken whole.
    func bytesBehindPausedBody(of transfer: UpstreamTransfer) -> Bool {
        guard let fd = transfer.pausedSocket else { return false }
        return sockets.bytesBehindPausedBody(on: fd, of: transfer)
    }

    /// CURLOPT_CLOSESOCKETFUNCTION.
    func closeSocket(_ fd: Int32) {
        sockets.close(fd)
    }

    /// The loop's events on a socket curl watches, as curl's CURL_CSELECT_*.
    func socketReady(_ fd: Int32, events: IOEvents) {
        var mask: Int32 = 0
        if events.contains(.readable) { mask |= CURL_CSELECT_IN }
        if events.contains(.writable) { mask |= CURL_CSELECT_OUT }
        if events.contains(.hangup) && mask == 0 { mask |= CURL_CSELECT_ERR }
        socketAction(fd, mask)
    }

    private func socketAction(_ fd: Int32, _ mask: Int32) {
        var running: Int32 = 0
        inCallback += 1
        _ = curl_multi_socket_action(multi, fd, mask, &running)
        inCallback -= 1
        if !drainQueued {
            drainQueued = true
            loop.enqueueDeferred(drainLater)
        }
    }

    /// The transfer in flight on `easy`, if any (its CURLOPT_PRIVATE names its slot).
    private func activeTransfer(_ easy: UnsafeMutableRawPointer) -> UpstreamTransfer? {
        var pointer: UnsafeMutableRawPointer?
        larder_easy_get_pointer(easy, CURLINFO_PRIVATE, &pointer)
        let slot = Int(bitPattern: pointer) - 1
        guard let transfer = active[slot], transfer.easy == easy else { return nil }
        return transfer
    }

    private func drainMessages() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard larder_multi_info_done(message, &easy, &result) != 0, let easy else { continue }
            guard let transfer = activeTransfer(easy) else { continue }
            // Over TLS, the connection curl kept in its pool, if it did: asked now, while the
            // handle is still in the multi handle (the lookup needs it, and walks the pool).
            var kept = CURL_SOCKET_BAD
            if transfer.tlsSession != nil, larder_easy_get_socket(easy, CURLINFO_ACTIVESOCKET, &kept) == CURLE_OK,
                kept != CURL_SOCKET_BAD
            {
                transfer.keptConnection = kept
            }
            if result == CURLE_OK {
                finish(transfer, error: nil)
            } else {
                finish(transfer, error: transfer.classify(result))
            }
        }
    }

    // MARK: Ending transfers

    func finish(_ transfer: UpstreamTransfer, error: UpstreamError?) {
        // Read from the handle before it is recycled for another transfer.
        let result: Result<UpstreamSummary, UpstreamError> = error.map { .failure($0) } ?? .success(transfer.summary)
        guard release(transfer) else { return }
        transfer.delegate?.upstreamDidFinish(result)
        transfer.delegate = nil
    }

    /// Takes the transfer out of curl and recycles its handle; false if already released.
    func release(_ transfer: UpstreamTransfer) -> Bool {
        guard let slot = transfer.slot, active[slot] === transfer else { return false }
        active.remove(at: slot)
        transfer.disarmTimeout(loop: loop)
        curl_multi_remove_handle(multi, transfer.easy)
        inspectConnection(after: transfer)
        transfer.detachFromCurl()
        if spareHandles.count < 64 { spareHandles.append(transfer.handle) }
        transfer.slot = nil
        return true
    }

    func cancel(_ transfer: UpstreamTransfer) {
        if inCallback > 0 {
            transfer.delegate = nil
            loop.enqueueDeferred { [weakSelf] in _ = weakSelf.object?.release(transfer) }
        } else {
            transfer.delegate = nil
            _ = release(transfer)
        }
    }

    /// Tells curl which directions of `transfer` are paused now (its body callbacks pause
    /// them; ``UpstreamTransfer/resumeReceiving()`` and `resumeSending()` lift them).
    ///
    /// curl hands over the bytes it held back from inside `curl_easy_pause`: a callback there
    /// is one like any other, and a release it asks for waits for the call to return (curl
    /// refuses to remove a handle from inside it, and the handle would go back to the spares
    /// still in curl's hands).
    func updatePause(_ transfer: UpstreamTransfer) {
        inCallback += 1
        curl_easy_pause(transfer.easy, (transfer.receivePaused ? CURLPAUSE_RECV : 0) | (transfer.sendPaused ? CURLPAUSE_SEND : 0))
        inCallback -= 1
    }
}

// MARK: UpstreamTransfer, curl side

extension UpstreamTransfer {
    var easy: UnsafeMutableRawPointer { handle.pointer }

    var summary: UpstreamSummary {
        var connects = 0
        larder_easy_get_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        return UpstreamSummary(bodyBytes: bodyBytes, reusedConnection: connects == 0)
    }

    func detachFromCurl() {
        handle.stopRunning(self)
        if let headerList {
            // curl keeps the list pointer in the recycled handle; clear it before freeing.
            larder_easy_set_slist(easy, CURLOPT_HTTPHEADER, nil)
            headerList.free()
            self.headerList = nil
        }
    }

    // MARK: Setup

    /// Sets the handle up for `request`; false when its URL cannot be handed to curl.
    func configure(slot: Int, request: UpstreamRequest) -> Bool {
        handle.prepareForTransfer()
        handle.run(self)
        guard handle.target(request.url, viaParent: request.parentProxy != nil) else { return false }
        // curl copies string options (CURLOPT_PROXY, _CUSTOMREQUEST) when they are set.
        handle.setSlot(slot)
        handle.setConnectTimeout(milliseconds: Int(request.connectTimeoutNanos / 1_000_000))
        larder_easy_set_slist(easy, CURLOPT_RESOLVE, client.resolveList)
        handle.setProxy(request.parentProxy)
        if request.url.scheme == "https", handle.trustAnchors != request.extraTrustAnchors {
            handle.trust(request.extraTrustAnchors)
        }
        if request.freshConnection {
            larder_easy_set_long(easy, CURLOPT_FRESH_CONNECT, 1)
            handle.needsReset = true
        }

        // A HEAD's content has no defined semantics (RFC 9110 §9.3.2) and curl cannot send one:
        // CURLOPT_UPLOAD would clear NOBODY and wait for a response body. It is not forwarded;
        // the client's connection closes after the response, its body unread.
        let uploadBody = request.method == .head ? nil : request.body
        // Options set here for anything but a plain GET stay in the handle: mark it for a reset.
        // CURLOPT_UPLOAD makes curl send a PUT unless the method is named, so every request
        // with a body names its method (a GET with one would otherwise change into a PUT).
        switch request.method {
        case .get where uploadBody == nil:
            larder_easy_set_long(easy, CURLOPT_HTTPGET, 1)
        case .head:
            larder_easy_set_long(easy, CURLOPT_NOBODY, 1)
            handle.needsReset = true
        default:
            larder_easy_set_string(easy, CURLOPT_CUSTOMREQUEST, request.method.rawValue)
            handle.needsReset = true
        }
        if let body = uploadBody {
            larder_easy_set_long(easy, CURLOPT_UPLOAD, 1)
            switch body {
            case .known(let length): larder_easy_set_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length))
            case .unknown: larder_easy_set_offset(easy, CURLOPT_INFILESIZE_LARGE, -1)
            }
        }

        let list = HeaderList(request.headers)
        headerList = list
        larder_easy_set_slist(easy, CURLOPT_HTTPHEADER, list.first)
        return true
    }

    // MARK: Callbacks (run inside curl_multi_socket_action or curl_easy_pause)

    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let delegate else { return 0 }
        guard receivedHead else {
            // Body bytes with no final head (libcurl's idea of a response is not Larder's): no
            // reader can take them, and a transfer paused for them would never end.
            protocolError = "the origin sent body bytes before a final response head"
            return 0
        }
        if delegate.upstreamDidReceiveBody(bytes) {
            bodyBytes += bytes.count
            deadline.receivedBody(bytes.count, now: client.loopNow)
            return bytes.count
        }
        receivePaused = true
        deadline.pause()
        return Int(CURL_WRITEFUNC_PAUSE)
    }

    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let delegate else { return Int(CURL_READFUNC_ABORT) }
        switch delegate.upstreamWantsRequestBody(into: buffer) {
        case .bytes(let count):
            return count
        case .wait:
            sendPaused = true
            return Int(CURL_READFUNC_PAUSE)
        case .end:
            return 0
        case .abort:
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// The body's last byte (by its Content-Length) was taken. Over TLS, bytes OpenSSL holds
    /// past it are none of this response's (``UpstreamClient/inspectConnection(after:)``), nor
    /// are bytes that came on the socket while the transfer was paused on that last byte; and
    /// curl returns the connection to its pool as this transfer ends, where a transfer queued
    /// for the same origin (the per-host limit) takes it in the same call, before the loop can
    /// look: curl is told not to keep it.
    func bodyComplete() {
        let buffered = tlsSession.map(OpenSSL.sessionHasPendingBytes) ?? false
        guard buffered || client.bytesBehindPausedBody(of: self) else { return }
        larder_easy_set_long(easy, CURLOPT_FORBID_REUSE, 1)
        handle.needsReset = true
        client.idleConnectionClosed?(.data, connectionOrigin)
    }

    // MARK: Errors

    func classify(_ code: CURLcode) -> UpstreamError {
        if let refusal { return UpstreamError(kind: .forbidden, message: refusal, afterHead: false, connected: false) }
        let afterHead = receivedHead
        var detail = handle.errorBuffer[0] != 0 ? String(cString: handle.errorBuffer) : String(cString: curl_easy_strerror(code))
        let kind: UpstreamError.Kind
        switch code {
        case CURLE_OUT_OF_MEMORY where !afterHead:
            // What libcurl reports for a header field line over its 100 KiB limit (CURL_MAX_HTTP_HEADER).
            kind = .protocolError
            detail = "the origin's response head has a field line over 100 KiB"
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            kind = .dns
        case CURLE_COULDNT_CONNECT:
            kind = .connect
        case CURLE_OPERATION_TIMEDOUT:
            kind = .timeout
        case CURLE_PARTIAL_FILE:
            kind = .truncated
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            kind = afterHead ? .truncated : .reset
        case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK, CURLE_READ_ERROR:
            kind = protocolError != nil ? .protocolError : .aborted
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            kind = afterHead ? .truncated : .tls
        case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_CONTENT_ENCODING:
            kind = afterHead ? .truncated : .protocolError
        default:
            kind = afterHead ? .truncated : .other
        }
        // CURLINFO_CONNECT_TIME_T stays 0 until the TCP connection to the next hop completes.
        var connectTime: curl_off_t = 0
        _ = larder_easy_get_offset(easy, CURLINFO_CONNECT_TIME_T, &connectTime)
        var connects = 0
        larder_easy_get_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        return UpstreamError(
            kind: kind, message: protocolError ?? detail, afterHead: afterHead, connected: connectTime > 0,
            reusedConnection: connects == 0)
    }
}

import CCurl
import Glibc
import LarderHTTP
import LarderIO
import LarderTLS

// This file is Larder's only contact with libcurl: no CURL* type or curl_* call appears
// anywhere else. It drives curl's multi interface from an EventLoop (curl tells us which
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
    fileprivate var inCallback = 0

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
    fileprivate private(set) var resolveList: UnsafeMutablePointer<curl_slist>?
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
    fileprivate func openSocket(for transfer: UpstreamTransfer, address: SocketAddress?, family: Int32, type: Int32, protocol: Int32)
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
    fileprivate func bytesBehindPausedBody(of transfer: UpstreamTransfer) -> Bool {
        guard let fd = transfer.pausedSocket else { return false }
        return sockets.bytesBehindPausedBody(on: fd, of: transfer)
    }

    /// CURLOPT_CLOSESOCKETFUNCTION.
    fileprivate func closeSocket(_ fd: Int32) {
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
    fileprivate func release(_ transfer: UpstreamTransfer) -> Bool {
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
    func updatePause(_ transfer: UpstreamTransfer) {
        curl_easy_pause(transfer.easy, (transfer.receivePaused ? CURLPAUSE_RECV : 0) | (transfer.sendPaused ? CURLPAUSE_SEND : 0))
    }
}

// MARK: UpstreamTransfer, curl side

extension UpstreamTransfer {
    fileprivate var easy: UnsafeMutableRawPointer { handle.pointer }

    fileprivate var summary: UpstreamSummary {
        var connects = 0
        larder_easy_get_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        return UpstreamSummary(bodyBytes: bodyBytes, reusedConnection: connects == 0)
    }

    fileprivate func detachFromCurl() {
        if handle.running === self { handle.running = nil }
        if let headerList {
            // curl keeps the list pointer in the recycled handle; clear it before freeing.
            larder_easy_set_slist(easy, CURLOPT_HTTPHEADER, nil)
            headerList.free()
            self.headerList = nil
        }
    }

    // MARK: Setup

    /// Sets the handle up for `request`; false when its URL cannot be handed to curl.
    fileprivate func configure(slot: Int, request: UpstreamRequest) -> Bool {
        handle.prepareForTransfer()
        handle.running = self
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

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let delegate else { return 0 }
        if delegate.upstreamDidReceiveBody(bytes) {
            bodyBytes += bytes.count
            deadline.receivedBody(bytes.count, now: client.loopNow)
            return bytes.count
        }
        receivePaused = true
        deadline.pause()
        return Int(CURL_WRITEFUNC_PAUSE)
    }

    fileprivate func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
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
    fileprivate func bodyComplete() {
        let buffered = tlsSession.map(OpenSSL.sessionHasPendingBytes) ?? false
        guard buffered || client.bytesBehindPausedBody(of: self) else { return }
        larder_easy_set_long(easy, CURLOPT_FORBID_REUSE, 1)
        handle.needsReset = true
        client.idleConnectionClosed?(.data, connectionOrigin)
    }

    // MARK: Errors

    fileprivate func classify(_ code: CURLcode) -> UpstreamError {
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

/// One libcurl easy handle, kept across transfers. Options that never change are set once when
/// the handle is made; a plain GET then only sets what differs per request. `curl_easy_reset`
/// before every transfer cost more than the options it cleared: it also frees curl's receive
/// buffer, which curl then mallocs again (64 KiB) for the next transfer.
///
/// State: loop-confined; held by the client while spare, by one transfer while in use.
final class EasyHandle {
    let pointer: UnsafeMutableRawPointer
    /// curl writes the text of a failure here (CURLOPT_ERRORBUFFER); a stable allocation,
    /// because curl keeps the pointer for as long as the handle lives.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// Set when a transfer changed an option the next one would inherit (method, upload).
    var needsReset = false
    /// The transfer curl is running on the handle: from its setup until it is taken out of
    /// curl, which calls back only in between. Unowned: the transfer holds its handle.
    unowned(unsafe) var running: UpstreamTransfer?
    /// The extra trust anchors the handle verifies origins with (nil: the system store only).
    private(set) var trustAnchors: String?
    /// The owning client, unretained (it outlives its handles), for the socket callbacks.
    private let client: UnsafeMutableRawPointer
    /// The transfer's origin as curl's URL handle (CURLOPT_CURLU), copied by curl when a
    /// transfer starts (a CURLOPT_URL string it would parse and print back), and that origin.
    private let url: OpaquePointer
    private var urlOrigin: (scheme: String, host: String, port: Int)?
    /// Options as the handle holds them now (nil or false: not known to be set), so a transfer
    /// sets only those that differ from its predecessor's; cleared with the handle's options.
    /// curl keeps them as they were set (it copies strings when they are set).
    private var urlHandleSet = false
    private var privateSlot: Int?
    private var connectTimeoutMS: Int?
    private var proxy: String?

    /// The origin the handle points at, `scheme://host:port`, for logs.
    var origin: String {
        guard let urlOrigin else { return "" }
        return "\(urlOrigin.scheme)://\(urlOrigin.host):\(urlOrigin.port)"
    }

    init(client: UpstreamClient) {
        guard let pointer = curl_easy_init() else { fatalError("curl_easy_init failed") }
        self.pointer = pointer
        self.client = Unmanaged.passUnretained(client).toOpaque()
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        guard let url = curl_url() else { fatalError("curl_url failed") }
        self.url = url
        setConstantOptions()
    }

    // A transfer that has ended may still hold its handle (and read from it) after the
    // client let it go; the last reference frees it.
    deinit {
        curl_easy_cleanup(pointer)
        curl_url_cleanup(url)
        errorBuffer.deallocate()
    }

    /// Points the handle at `target`: its origin as curl's URL handle, set when it changes; its
    /// path and query as the request target, which curl writes as it is (its URL setters
    /// would lower-case percent-escapes), or the whole URL for an http request through a
    /// parent (RFC 9112 §3.2.2; https goes through a CONNECT tunnel). No parser checks these
    /// bytes after this one: any that could split the request refuse the URL.
    func target(_ target: AbsoluteURL, viaParent: Bool) -> Bool {
        guard target.isPlainOnTheWire else { return false }
        if let origin = urlOrigin, origin != (target.scheme, target.host, target.port) { urlOrigin = nil }
        if urlOrigin == nil {
            let port = target.port == target.defaultPort ? nil : String(target.port)
            guard larder_url_set_origin(url, target.scheme, target.host, port) == CURLUE_OK else { return false }
            urlOrigin = (target.scheme, target.host, target.port)
        }
        let requestTarget = viaParent && target.scheme == "http" ? target.description : target.pathAndQuery
        // curl copies it; withCString lends a short target from the stack, not a new array.
        _ = requestTarget.withCString { larder_easy_set_string(pointer, CURLOPT_REQUEST_TARGET, $0) }
        // curl reads the URL handle anew when each transfer starts.
        if !urlHandleSet {
            larder_easy_set_pointer(pointer, CURLOPT_CURLU, UnsafeMutableRawPointer(url))
            urlHandleSet = true
        }
        return true
    }

    /// CURLOPT_PRIVATE: the transfer's slot in its client's table, plus one.
    func setSlot(_ slot: Int) {
        guard privateSlot != slot else { return }
        larder_easy_set_pointer(pointer, CURLOPT_PRIVATE, UnsafeMutableRawPointer(bitPattern: slot + 1))
        privateSlot = slot
    }

    /// CURLOPT_CONNECTTIMEOUT_MS.
    func setConnectTimeout(milliseconds: Int) {
        guard connectTimeoutMS != milliseconds else { return }
        larder_easy_set_long(pointer, CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
        connectTimeoutMS = milliseconds
    }

    /// CURLOPT_PROXY: the parent proxy's URL, or "" for none. An empty string, not an unset
    /// option, disables curl's reading of http_proxy/HTTP_PROXY: the daemon's own environment
    /// must not redirect its upstream traffic.
    func setProxy(_ parent: String?) {
        let value = parent ?? ""
        guard proxy != value else { return }
        larder_easy_set_string(pointer, CURLOPT_PROXY, value)
        proxy = value
    }

    /// The transfer running on the handle `data` points at, in a callback of curl's.
    private static func running(_ data: UnsafeMutableRawPointer?) -> UpstreamTransfer {
        Unmanaged<EasyHandle>.fromOpaque(data!).takeUnretainedValue().running!
    }

    /// Brings the handle back to its constant options if the last transfer changed others.
    func prepareForTransfer() {
        if needsReset {
            curl_easy_reset(pointer)
            setConstantOptions()
            needsReset = false
            trustAnchors = nil
            urlHandleSet = false
            privateSlot = nil
            connectTimeoutMS = nil
            proxy = nil
        }
        errorBuffer[0] = 0
    }

    /// Verifies origins against the PEM file `file` and the system store, or (nil) the system
    /// store alone. curl takes one CA file, so with an extra one the system store comes in
    /// through its hashed directory (CURLOPT_CAPATH); curl's built-in defaults otherwise.
    /// Connections verified under other anchors are not reused for these (curl compares them).
    func trust(_ file: String?) {
        let defaults = EasyHandle.systemTrust
        larder_easy_set_string(pointer, CURLOPT_CAINFO, file ?? defaults.file)
        larder_easy_set_string(pointer, CURLOPT_CAPATH, defaults.directory ?? "/etc/ssl/certs")
        trustAnchors = file
    }

    /// curl's compiled-in CA bundle and directory (Debian: /etc/ssl/certs/ca-certificates.crt
    /// and /etc/ssl/certs).
    private static let systemTrust: (file: String?, directory: String?) = {
        guard let info = larder_curl_version_info() else { return (nil, nil) }
        return (info.pointee.cainfo.map { String(cString: $0) }, info.pointee.capath.map { String(cString: $0) })
    }()

    private func setConstantOptions() {
        larder_easy_set_long(pointer, CURLOPT_NOSIGNAL, 1)
        larder_easy_set_long(pointer, CURLOPT_FOLLOWLOCATION, 0)
        larder_easy_set_long(pointer, CURLOPT_PATH_AS_IS, 1)
        // As for CURLOPT_PROXY: without a list of its own, curl reads no_proxy/NO_PROXY for
        // every transfer and goes around the parent for the hosts named there. Exceptions to
        // the parent are `upstream.direct`'s, not the service environment's.
        larder_easy_set_string(pointer, CURLOPT_NOPROXY, "")
        larder_easy_set_long(pointer, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        larder_easy_set_long(pointer, CURLOPT_HTTP_CONTENT_DECODING, 0)
        larder_easy_set_long(pointer, CURLOPT_HTTP_TRANSFER_DECODING, 1)
        larder_easy_set_long(pointer, CURLOPT_BUFFERSIZE, 64 * 1024)
        larder_easy_set_long(pointer, CURLOPT_TCP_NODELAY, 1)
        larder_easy_set_long(pointer, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        larder_easy_set_pointer(pointer, CURLOPT_ERRORBUFFER, errorBuffer)
        // Every callback's data is the handle, set once: the transfer is the one it runs.
        let me = Unmanaged.passUnretained(self).toOpaque()
        for option in [CURLOPT_OPENSOCKETDATA, CURLOPT_PREREQDATA, CURLOPT_HEADERDATA, CURLOPT_WRITEDATA, CURLOPT_READDATA] {
            larder_easy_set_pointer(pointer, option, me)
        }
        larder_easy_set_opensocket_callback(pointer) { handlep, _, address in
            let transfer = EasyHandle.running(handlep)
            guard let address else { return CURL_SOCKET_BAD }
            let target = withUnsafePointer(to: &address.pointee.addr) { raw in
                SocketAddress(raw, length: Int(address.pointee.addrlen))
            }
            return transfer.client.openSocket(
                for: transfer, address: target, family: address.pointee.family, type: address.pointee.socktype,
                protocol: address.pointee.`protocol`)
        }
        // Runs once the connection is up, new or pooled, before the request is sent: a pooled
        // connection was checked for whoever opened it, not for this transfer.
        larder_easy_set_prereq_callback(pointer) { handlep, primaryIP, _, primaryPort, _ in
            let transfer = EasyHandle.running(handlep)
            let address = primaryIP.flatMap { SocketAddress(literal: String(cString: $0), port: UInt16(clamping: primaryPort)) }
            return transfer.mayConnect(to: address) ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
        }
        larder_easy_set_closesocket_callback(pointer) { clientp, fd in
            let client = Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue()
            client.closeSocket(fd)
            return 0
        }
        larder_easy_set_pointer(pointer, CURLOPT_CLOSESOCKETDATA, client)
        larder_easy_set_data_callback(pointer, CURLOPT_HEADERFUNCTION) { buffer, size, count, userdata in
            let transfer = EasyHandle.running(userdata)
            let hadHead = transfer.receivedHead
            let taken = transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
            // Once a transfer, while its connection is surely attached.
            if !hadHead, transfer.receivedHead { transfer.tlsSession = larder_easy_tls_session(transfer.easy) }
            return taken
        }
        larder_easy_set_data_callback(pointer, CURLOPT_WRITEFUNCTION) { buffer, size, count, userdata in
            let transfer = EasyHandle.running(userdata)
            let taken = transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
            if taken == size * count, transfer.bodyBytes == transfer.declaredLength { transfer.bodyComplete() }
            return taken
        }
        larder_easy_set_data_callback(pointer, CURLOPT_READFUNCTION) { buffer, size, count, userdata in
            let transfer = EasyHandle.running(userdata)
            return transfer.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
        }
    }
}

/// A request's header lines as a `curl_slist` in one allocation: the nodes first, then the
/// NUL-terminated lines they point at. curl only reads a CURLOPT_HTTPHEADER list (the caller
/// owns it), so one free releases everything; `curl_slist_append` costs two mallocs per line.
/// Written in one pass into room sized from the fields' wire form, which is never shorter:
/// `Name: value\r\n` becomes `Name: value\0` or, for an empty value, `Name;\0`.
struct HeaderList {
    private let storage: UnsafeMutableRawPointer
    /// The list's first node.
    let first: UnsafeMutablePointer<curl_slist>

    init(_ headers: HTTPHeaders) {
        // Every field, then "Accept:" and "Expect:".
        let maxLines = headers.count + 2
        let maxTextBytes = headers.wire.count + 16
        let nodeBytes = maxLines * MemoryLayout<curl_slist>.stride
        storage = .allocate(byteCount: nodeBytes + maxTextBytes, alignment: MemoryLayout<curl_slist>.alignment)
        let nodes = storage.bindMemory(to: curl_slist.self, capacity: maxLines)
        let text = (storage + nodeBytes).bindMemory(to: UInt8.self, capacity: maxTextBytes)
        var writer = ByteWriter(UnsafeMutableBufferPointer(start: text, count: maxTextBytes))
        var lines = 0
        var sawAccept = false
        headers.forEachField { name, value in
            guard Self.isForwarded(name) else { return }
            if ASCII.equalsIgnoringCase(name, "Accept") { sawAccept = true }
            let start = writer.count
            writer.append(contentsOf: name.assumingMemoryBound(to: UInt8.self))
            if value.isEmpty {
                writer.append(UInt8(ascii: ";"))  // "Name;" is curl's spelling for an empty value
            } else {
                writer.append(": " as StaticString)
                writer.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
            }
            writer.append(0)
            Self.link(nodes, &lines, to: text + start)
        }
        // Remove the headers curl would add on its own.
        if !sawAccept {
            let start = writer.count
            writer.append("Accept:\0" as StaticString)
            Self.link(nodes, &lines, to: text + start)
        }
        let start = writer.count
        writer.append("Expect:\0" as StaticString)
        Self.link(nodes, &lines, to: text + start)
        first = nodes
    }

    /// curl frames the body itself; 100-continue is handled on the client side.
    private static func isForwarded(_ name: UnsafeRawBufferPointer) -> Bool {
        !ASCII.equalsIgnoringCase(name, "Content-Length") && !ASCII.equalsIgnoringCase(name, "Expect")
    }

    /// Makes node `count` the list's last, pointing at `line`, and links the one before to it.
    private static func link(_ nodes: UnsafeMutablePointer<curl_slist>, _ count: inout Int, to line: UnsafeMutablePointer<UInt8>) {
        (nodes + count).initialize(to: curl_slist(data: UnsafeMutableRawPointer(line).assumingMemoryBound(to: CChar.self), next: nil))
        if count > 0 { nodes[count - 1].next = nodes + count }
        count += 1
    }

    func free() { storage.deallocate() }
}

import CCurl
import Glibc
import LarderHTTP
import LarderIO

// This file is Larder's only contact with libcurl: no CURL* type or curl_* call appears
// anywhere else. It drives curl's multi interface from an EventLoop (curl tells us which
// sockets and timeouts to watch, we tell curl when they are ready), so upstream I/O shares
// the loop thread with the client connections and needs no locks or thread hops.

/// The upstream side of one event loop: a libcurl multi handle whose sockets and timer are
/// watched by that loop. Connections to origins are pooled in the multi handle and reused.
///
/// State: loop-confined. Every property is touched only on the owning loop's thread, including
/// from curl's callbacks, which curl invokes only from inside `curl_multi_socket_action`.
public final class UpstreamClient {
    private let multi: UnsafeMutableRawPointer
    private let loop: EventLoop
    private var watches: [Int32: SocketWatch] = [:]
    private var timer: EventLoop.TimerToken?
    private var active: [UnsafeMutableRawPointer: UpstreamTransfer] = [:]
    private var spareHandles: [UnsafeMutableRawPointer] = []
    /// Set while curl is running one of our callbacks; removing a handle then is not allowed.
    fileprivate var inCallback = 0

    /// Transfers in flight.
    public var activeCount: Int { active.count }

    private static let globalInit: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    /// The libcurl version string, for logs and `--version`.
    public static var libraryVersion: String { String(cString: curl_version()) }

    /// Creates the client for `loop`; call on that loop's thread.
    public init(loop: EventLoop, maxConnectionsPerHost: Int) {
        precondition(UpstreamClient.globalInit, "curl_global_init failed")
        guard let handle = curl_multi_init() else { fatalError("curl_multi_init failed") }
        multi = handle
        self.loop = loop
        let me = Unmanaged.passUnretained(self).toOpaque()
        larder_multi_set_socket_callback(multi) { _, fd, what, userp, _ in
            let client = Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue()
            client.watch(fd: fd, what: what)
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
        for (_, transfer) in active { transfer.detachFromCurl() }
        for handle in spareHandles { curl_easy_cleanup(handle) }
        curl_multi_cleanup(multi)
    }

    /// Limits concurrent connections to one origin; further transfers queue inside curl.
    public func setMaxConnectionsPerHost(_ count: Int) {
        larder_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, count))
    }

    /// Starts a transfer; events go to `delegate` on this loop.
    public func start(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> UpstreamTransfer {
        let easy: UnsafeMutableRawPointer
        if let spare = spareHandles.popLast() {
            curl_easy_reset(spare)
            easy = spare
        } else {
            guard let fresh = curl_easy_init() else { fatalError("curl_easy_init failed") }
            easy = fresh
        }
        let transfer = UpstreamTransfer(client: self, easy: easy, request: request, delegate: delegate)
        let key = Unmanaged.passUnretained(transfer).toOpaque()
        active[key] = transfer
        transfer.configure(key: key)
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            let message = String(cString: curl_multi_strerror(code))
            loop.enqueueDeferred { [weak self] in
                self?.finish(transfer, error: UpstreamError(kind: .other, message: message, afterHead: false))
            }
        }
        transfer.armTimeout(now: loop.now)
        return transfer
    }

    // MARK: curl → loop

    private final class SocketWatch: IOHandler {
        let fd: Int32
        let client: UpstreamClient
        init(fd: Int32, client: UpstreamClient) {
            self.fd = fd
            self.client = client
        }
        func handleIO(_ events: IOEvents) {
            var mask: Int32 = 0
            if events.contains(.readable) { mask |= CURL_CSELECT_IN }
            if events.contains(.writable) { mask |= CURL_CSELECT_OUT }
            if events.contains(.hangup) && mask == 0 { mask |= CURL_CSELECT_ERR }
            client.socketAction(fd, mask)
        }
    }

    private func watch(fd: Int32, what: Int32) {
        if what == CURL_POLL_REMOVE {
            if watches.removeValue(forKey: fd) != nil { loop.deregister(fd) }
            return
        }
        var interest: IOEvents = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { interest.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { interest.insert(.writable) }
        if watches[fd] != nil {
            loop.setInterest(fd, interest)
        } else {
            let watch = SocketWatch(fd: fd, client: self)
            do {
                try loop.register(fd, interest: interest, handler: watch)
                watches[fd] = watch
            } catch {
                // Registration failing leaves curl's own timeout to end the transfer.
            }
        }
    }

    private func setTimer(milliseconds: Int) {
        if let timer { loop.cancel(timer) }
        timer = nil
        guard milliseconds >= 0 else { return }
        timer = loop.schedule(afterNanos: UInt64(milliseconds) * 1_000_000) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.socketAction(CURL_SOCKET_TIMEOUT, 0)
        }
    }

    private func socketAction(_ fd: Int32, _ mask: Int32) {
        var running: Int32 = 0
        inCallback += 1
        _ = curl_multi_socket_action(multi, fd, mask, &running)
        inCallback -= 1
        drainMessages()
    }

    private func drainMessages() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard larder_multi_info_done(message, &easy, &result) != 0, let easy else { continue }
            var pointer: UnsafeMutableRawPointer?
            larder_easy_get_pointer(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer, let transfer = active[pointer] else { continue }
            if result == CURLE_OK {
                finish(transfer, error: nil)
            } else {
                finish(transfer, error: transfer.classify(result))
            }
        }
    }

    // MARK: Ending transfers

    fileprivate func finish(_ transfer: UpstreamTransfer, error: UpstreamError?) {
        guard release(transfer) else { return }
        if let error {
            transfer.delegate?.upstreamDidFinish(.failure(error))
        } else {
            transfer.delegate?.upstreamDidFinish(.success(transfer.summary))
        }
        transfer.delegate = nil
    }

    /// Takes the transfer out of curl and recycles its handle; false if already released.
    fileprivate func release(_ transfer: UpstreamTransfer) -> Bool {
        guard let key = transfer.key, active.removeValue(forKey: key) != nil else { return false }
        transfer.disarmTimeout(loop: loop)
        curl_multi_remove_handle(multi, transfer.easy)
        transfer.detachFromCurl()
        if spareHandles.count < 64 {
            spareHandles.append(transfer.easy)
        } else {
            curl_easy_cleanup(transfer.easy)
        }
        transfer.key = nil
        return true
    }

    fileprivate func cancel(_ transfer: UpstreamTransfer) {
        if inCallback > 0 {
            transfer.delegate = nil
            loop.enqueueDeferred { [weak self] in _ = self?.release(transfer) }
        } else {
            transfer.delegate = nil
            _ = release(transfer)
        }
    }

    fileprivate func timeoutFired(_ transfer: UpstreamTransfer) {
        guard transfer.key != nil else { return }
        let now = loop.now
        if let deadline = transfer.nextDeadline(now: now) {
            transfer.timeoutToken = loop.schedule(afterNanos: deadline - now) { [weak self, weak transfer] in
                guard let self, let transfer else { return }
                self.timeoutFired(transfer)
            }
            return
        }
        let seconds = transfer.request.timeout.components.seconds
        let message = transfer.head == nil
            ? "no response head within \(seconds)s" : "response body stalled for \(seconds)s"
        finish(transfer, error: UpstreamError(kind: .timeout, message: message, afterHead: transfer.head != nil))
    }

    fileprivate func pause(_ easy: UnsafeMutableRawPointer, mask: Int32) {
        curl_easy_pause(easy, mask)
    }

    fileprivate var loopNow: UInt64 { loop.now }

    fileprivate func schedule(afterNanos: UInt64, _ body: @escaping () -> Void) -> EventLoop.TimerToken {
        loop.schedule(afterNanos: afterNanos, body)
    }
}

/// One upstream exchange (a curl easy handle). Owned by its ``UpstreamClient`` while active.
///
/// State: loop-confined, like the client.
public final class UpstreamTransfer {
    fileprivate let client: UpstreamClient
    fileprivate let easy: UnsafeMutableRawPointer
    fileprivate let request: UpstreamRequest
    /// Strong while the transfer runs; set to nil when it ends or is cancelled, which breaks the
    /// delegate → transfer → delegate cycle.
    fileprivate var delegate: (any UpstreamTransferDelegate)?
    fileprivate var key: UnsafeMutableRawPointer?
    fileprivate var headerList: UnsafeMutablePointer<curl_slist>?
    fileprivate var headParser = ResponseHeadParser()
    fileprivate var head: ResponseHead?
    fileprivate var bodyBytes = 0
    fileprivate var lastProgress: UInt64 = 0
    fileprivate var startTime: UInt64 = 0
    fileprivate var timeoutToken: EventLoop.TimerToken?
    fileprivate var receivePaused = false
    fileprivate var sendPaused = false
    fileprivate var protocolError: String?
    private var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    private var urlString: [CChar] = []
    private var methodString: [CChar] = []
    private var proxyString: [CChar] = []

    fileprivate init(client: UpstreamClient, easy: UnsafeMutableRawPointer, request: UpstreamRequest, delegate: any UpstreamTransferDelegate) {
        self.client = client
        self.easy = easy
        self.request = request
        self.delegate = delegate
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
    }

    /// Whether the response head has arrived.
    public var hasHead: Bool { head != nil }

    /// Stops the transfer; the delegate hears nothing more.
    public func cancel() {
        client.cancel(self)
    }

    /// Resumes delivery after the delegate refused body bytes.
    public func resumeReceiving() {
        guard receivePaused, key != nil else { return }
        receivePaused = false
        lastProgress = client.loopNow
        client.pause(easy, mask: sendPaused ? CURLPAUSE_SEND : CURLPAUSE_CONT)
    }

    /// Resumes sending after the delegate had no request body bytes to give.
    public func resumeSending() {
        guard sendPaused, key != nil else { return }
        sendPaused = false
        client.pause(easy, mask: receivePaused ? CURLPAUSE_RECV : CURLPAUSE_CONT)
    }

    fileprivate var summary: UpstreamSummary {
        var connects = 0
        larder_easy_get_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        return UpstreamSummary(bodyBytes: bodyBytes, reusedConnection: connects == 0)
    }

    fileprivate func detachFromCurl() {
        if let headerList {
            curl_slist_free_all(headerList)
            self.headerList = nil
        }
    }

    // MARK: Timeouts (own timer: curl's CURLOPT_TIMEOUT would also count time paused for a slow client)

    fileprivate func armTimeout(now: UInt64) {
        startTime = now
        lastProgress = now
        let timeout = request.timeout.totalNanoseconds
        guard timeout > 0 else { return }
        timeoutToken = client.schedule(afterNanos: timeout) { [weak self] in
            guard let self else { return }
            self.client.timeoutFired(self)
        }
    }

    fileprivate func disarmTimeout(loop: EventLoop) {
        if let timeoutToken { loop.cancel(timeoutToken) }
        timeoutToken = nil
    }

    /// The next time to look again, or nil if the timeout has passed.
    fileprivate func nextDeadline(now: UInt64) -> UInt64? {
        let timeout = request.timeout.totalNanoseconds
        // A transfer paused because the client reads slowly is not stalled upstream.
        if receivePaused { return now + timeout }
        let reference = head == nil ? startTime : lastProgress
        let deadline = reference + timeout
        return deadline > now ? deadline : nil
    }

    // MARK: Setup

    fileprivate func configure(key: UnsafeMutableRawPointer) {
        self.key = key
        urlString = Array(request.url.description.utf8CString)
        larder_easy_set_string(easy, CURLOPT_URL, urlString)
        larder_easy_set_pointer(easy, CURLOPT_PRIVATE, key)
        larder_easy_set_long(easy, CURLOPT_NOSIGNAL, 1)
        larder_easy_set_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        larder_easy_set_long(easy, CURLOPT_PATH_AS_IS, 1)
        larder_easy_set_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        larder_easy_set_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0)
        larder_easy_set_long(easy, CURLOPT_HTTP_TRANSFER_DECODING, 1)
        larder_easy_set_long(easy, CURLOPT_BUFFERSIZE, 64 * 1024)
        larder_easy_set_long(easy, CURLOPT_TCP_NODELAY, 1)
        larder_easy_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(request.connectTimeout.totalMilliseconds))
        larder_easy_set_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        larder_easy_set_pointer(easy, CURLOPT_ERRORBUFFER, &errorBuffer)
        // An empty proxy string disables curl's reading of http_proxy/HTTP_PROXY: the daemon's
        // own environment must not redirect its upstream traffic.
        proxyString = Array((request.parentProxy ?? "").utf8CString)
        larder_easy_set_string(easy, CURLOPT_PROXY, proxyString)

        switch request.method {
        case .get:
            larder_easy_set_long(easy, CURLOPT_HTTPGET, 1)
        case .head:
            larder_easy_set_long(easy, CURLOPT_NOBODY, 1)
        default:
            methodString = Array(request.method.rawValue.utf8CString)
            larder_easy_set_string(easy, CURLOPT_CUSTOMREQUEST, methodString)
        }
        if let body = request.body {
            larder_easy_set_long(easy, CURLOPT_UPLOAD, 1)
            switch body {
            case .known(let length): larder_easy_set_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length))
            case .unknown: larder_easy_set_offset(easy, CURLOPT_INFILESIZE_LARGE, -1)
            }
            larder_easy_set_data_callback(easy, CURLOPT_READFUNCTION) { buffer, size, count, userdata in
                let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
                return transfer.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
            }
            larder_easy_set_pointer(easy, CURLOPT_READDATA, key)
        }

        var list: UnsafeMutablePointer<curl_slist>?
        var sawAccept = false
        for field in request.headers {
            if ASCII.equalsIgnoringCase(field.name, "Content-Length") || ASCII.equalsIgnoringCase(field.name, "Expect") {
                continue  // curl frames the body itself; 100-continue is handled on the client side
            }
            if ASCII.equalsIgnoringCase(field.name, "Accept") { sawAccept = true }
            var line: [UInt8] = []
            line.reserveCapacity(field.name.utf8.count + field.value.utf8.count + 3)
            line.append(contentsOf: field.name.utf8)
            line.append(contentsOf: ": ".utf8)
            ASCII.appendBytes(of: field.value, to: &line)
            if field.value.isEmpty {
                // "Name;" is curl's spelling for a header with an empty value.
                line = Array(field.name.utf8) + [UInt8(ascii: ";")]
            }
            line.append(0)
            list = line.withUnsafeBufferPointer { pointer in
                pointer.withMemoryRebound(to: CChar.self) { curl_slist_append(list, $0.baseAddress) }
            }
        }
        // Remove the headers curl would add on its own.
        if !sawAccept { list = curl_slist_append(list, "Accept:") }
        list = curl_slist_append(list, "Expect:")
        headerList = list
        larder_easy_set_slist(easy, CURLOPT_HTTPHEADER, list)

        larder_easy_set_data_callback(easy, CURLOPT_HEADERFUNCTION) { buffer, size, count, userdata in
            let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }
        larder_easy_set_pointer(easy, CURLOPT_HEADERDATA, key)
        larder_easy_set_data_callback(easy, CURLOPT_WRITEFUNCTION) { buffer, size, count, userdata in
            let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
        }
        larder_easy_set_pointer(easy, CURLOPT_WRITEDATA, key)
    }

    // MARK: Callbacks (run inside curl_multi_socket_action or curl_easy_pause)

    private func receiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Int {
        do {
            switch try headParser.feed(line) {
            case .none, .interim:
                break
            case .final(let parsed):
                head = parsed
                lastProgress = client.loopNow
                delegate?.upstreamDidReceiveHead(parsed)
            }
        } catch {
            protocolError = error.reason
            return 0
        }
        return line.count
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let delegate else { return 0 }
        if delegate.upstreamDidReceiveBody(bytes) {
            bodyBytes += bytes.count
            lastProgress = client.loopNow
            return bytes.count
        }
        receivePaused = true
        return Int(CURL_WRITEFUNC_PAUSE)
    }

    private func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
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

    // MARK: Errors

    fileprivate func classify(_ code: CURLcode) -> UpstreamError {
        let detail = errorBuffer[0] != 0
            ? String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : String(cString: curl_easy_strerror(code))
        let afterHead = head != nil
        let kind: UpstreamError.Kind
        switch code {
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
        case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_CONTENT_ENCODING:
            kind = afterHead ? .truncated : .protocolError
        default:
            kind = afterHead ? .truncated : .other
        }
        // CURLINFO_CONNECT_TIME_T stays 0 until the TCP connection to the next hop completes.
        var connectTime: curl_off_t = 0
        _ = larder_easy_get_offset(easy, CURLINFO_CONNECT_TIME_T, &connectTime)
        return UpstreamError(kind: kind, message: protocolError ?? detail, afterHead: afterHead, connected: connectTime > 0)
    }
}

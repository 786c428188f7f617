import CCurl
import Glibc
import LarderHTTP
import LarderIO
import LarderTLS

// With UpstreamClient.swift, the only contact with libcurl: an easy handle, the options it
// keeps across transfers, its callbacks and the request's header list.

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
    /// curl, which calls back only in between. Unretained: the transfer holds its handle, and a
    /// callback (eleven a miss) then borrows it without a retain and release of its own.
    private var running: Unmanaged<UpstreamTransfer>?
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

    /// Makes `transfer` the one curl runs on the handle.
    func run(_ transfer: UpstreamTransfer) { running = .passUnretained(transfer) }

    /// Forgets `transfer` if it is the one running (a handle may have gone to another since).
    func stopRunning(_ transfer: UpstreamTransfer) {
        if running?.toOpaque() == Unmanaged.passUnretained(transfer).toOpaque() { running = nil }
    }

    /// Runs `body` on the transfer running on the handle `data` points at, in a callback of
    /// curl's, borrowed: curl calls back only inside `curl_multi_socket_action` or
    /// `curl_easy_pause`, while the client's table of transfers in flight holds it (a release
    /// asked for meanwhile waits for the call to return, ``UpstreamClient/inCallback``).
    private static func withRunning<Result>(_ data: UnsafeMutableRawPointer?, _ body: (UpstreamTransfer) -> Result) -> Result {
        Unmanaged<EasyHandle>.fromOpaque(data!)._withUnsafeGuaranteedRef { $0.running! }._withUnsafeGuaranteedRef(body)
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
            guard let address else { return CURL_SOCKET_BAD }
            let target = withUnsafePointer(to: &address.pointee.addr) { raw in
                SocketAddress(raw, length: Int(address.pointee.addrlen))
            }
            return EasyHandle.withRunning(handlep) { transfer in
                transfer.client.openSocket(
                    for: transfer, address: target, family: address.pointee.family, type: address.pointee.socktype,
                    protocol: address.pointee.`protocol`)
            }
        }
        // Runs once the connection is up, new or pooled, before the request is sent: a pooled
        // connection was checked for whoever opened it, not for this transfer.
        larder_easy_set_prereq_callback(pointer) { handlep, primaryIP, _, primaryPort, _ in
            let address = primaryIP.flatMap { SocketAddress(literal: $0, port: UInt16(clamping: primaryPort)) }
            return EasyHandle.withRunning(handlep) { $0.mayConnect(to: address) } ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
        }
        larder_easy_set_closesocket_callback(pointer) { clientp, fd in
            let client = Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue()
            client.closeSocket(fd)
            return 0
        }
        larder_easy_set_pointer(pointer, CURLOPT_CLOSESOCKETDATA, client)
        larder_easy_set_data_callback(pointer, CURLOPT_HEADERFUNCTION) { buffer, size, count, userdata in
            EasyHandle.withRunning(userdata) { transfer in
                let hadHead = transfer.receivedHead
                let taken = transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
                // Once a transfer, while its connection is surely attached.
                if !hadHead, transfer.receivedHead { transfer.tlsSession = larder_easy_tls_session(transfer.easy) }
                return taken
            }
        }
        larder_easy_set_data_callback(pointer, CURLOPT_WRITEFUNCTION) { buffer, size, count, userdata in
            EasyHandle.withRunning(userdata) { transfer in
                let taken = transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
                if taken == size * count, transfer.bodyBytes == transfer.declaredLength { transfer.bodyComplete() }
                return taken
            }
        }
        larder_easy_set_data_callback(pointer, CURLOPT_READFUNCTION) { buffer, size, count, userdata in
            EasyHandle.withRunning(userdata) { $0.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count)) }
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

import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// One request and the state of its answer, from the parsed head to the last byte queued.
///
/// State: owned by its client connection, on that connection's loop.
final class Exchange {
    let head: RequestHead
    let startNanos: UInt64
    /// The configuration the request started under (a reload does not change it mid-way).
    let runtime: RuntimeConfig
    var keepAlive: Bool
    var route: Route?
    /// Whether a route matched. Most requests have none, and a copy of `route` costs even
    /// then: the runtime's generic Optional copy of a large value. Read this first, copy
    /// `route` only when it is there.
    var hasRoute: Bool {
        switch route {
        case .none: false
        case .some: true
        }
    }
    /// The absolute target, once checked.
    var url: AbsoluteURL?
    /// The cache key `url` is stored under (the route may build it otherwise than from the URL).
    var key: CacheKey?
    var requestFraming: BodyFraming = .none
    var body: RequestBodyReader?
    /// A malformed request body found while streaming it upstream.
    var bodyError: HTTPParseError?

    var status = 0
    var outcome: RequestOutcome = .miss
    var bodyBytesSent = 0
    /// The body did not match the length its head declared: the connection must close.
    var framingBroken = false
    var attempts = 0
    /// The retries made for this request (`connect:200ms,5xx:400ms`), for the access log.
    var retries: String?
    /// Why it failed, when Larder answered (or ended) it with an error (the access log's `detail`).
    var failure: FailureCause?
    /// How the origin failed when a stale copy answered instead (stale-if-error): the access
    /// log's `detail` for a request that did not fail itself, so not a recent failure.
    var staleBecause: FailureCause?
    /// The request passed proxy authentication (or none is asked for): only such a request's
    /// failure is listed among the dashboard's recent failures, which a client that is not a
    /// user could otherwise fill with its own.
    var admitted = false

    var policy: CachePolicy = .http
    var directives = RequestDirectives.none
    /// The stored response the request started from, if any (validated, or the fallback for
    /// stale-if-error).
    var stored: StoredResponse?
    /// What becomes of a GET's Range on its way upstream (RFC 9110 §14.2).
    var range = RangeForwarding.none
    /// The bytes of the body this client gets (a 206), once decided.
    var slice: (first: Int, last: Int)?

    /// The connection moved here from another loop to join this loop's fill; it moves once.
    let moved: Bool
    /// Set when released from a fill for another variant: this request's values for its Vary.
    var variant: [String: String]?
    /// For `dedup = "always"`: the request body read in full before the fill key is known.
    var bufferedBody: [UInt8]?
    var bufferedOffset = 0
    /// How much of the body `bufferRequestBody` reads before it gives up and streams.
    var bodyBufferLimit = 0
    /// `100 Continue` already went to the client.
    var continueSent = false
    /// Where the exchange is (``State``); moved on only by ``take(_:now:)``.
    private(set) var state: State = .routing
    var framing: ResponseFraming = .none
    var cacheStatus = CacheStatus() {
        // Every Cache-Status of a request whose route keys it otherwise than by URL names the
        // key (RFC 9211 §2.7), however the status was built.
        didSet { if let customKey, cacheStatus.key == nil { cacheStatus.key = customKey } }
    }
    /// The key, when the route builds it otherwise than from the URL (set by routing).
    var customKey: String?
    /// An answer assembled from slices, and where it is.
    var slices: SlicePlan?
    /// Whether an answer is assembled from slices. Asked on every miss at each step of its
    /// fill: `slices != nil` from outside copied the plan (a String in it) through the
    /// runtime's generic Optional copy to compare it.
    var isSliced: Bool {
        switch slices {
        case .none: false
        case .some: true
        }
    }

    init(head: consuming RequestHead, startNanos: UInt64, runtime: RuntimeConfig, moved: Bool = false) {
        keepAlive = head.keepAlive
        self.head = head
        self.startNanos = startNanos
        self.runtime = runtime
        self.moved = moved
    }

    /// Takes a step (``step(_:on:now:)``) and returns what the connection does next; one the
    /// design does not allow is a bug, asserted in debug builds and ignored (nil) in release.
    @discardableResult
    func take(_ event: Event, now: UInt64 = 0) -> Action? {
        guard let (next, action) = Exchange.step(state, on: event, now: now) else {
            assertionFailure("exchange step \(event) is not allowed in stage \(stage)")
            return nil
        }
        state = next
        return action
    }

    /// Hands over what the reader thread's check found for this request (once: the lookup
    /// after the next may go to it again).
    func takeCheckedEntry() -> DiskCache.Verification? {
        switch state {
        case .lookingUp(let checked?, let alone):
            state = .lookingUp(checked: nil, alone: alone)
            return checked
        case .slicing(var progress):
            guard case .checked(let checked) = progress.disk else { return nil }
            progress.disk = .none
            state = .slicing(progress)
            return checked
        default:
            return nil
        }
    }

    /// The fill the exchange reads and where it is in it, as its state carries it.
    var attachment: FillAttachment? {
        switch state {
        case .readingFill(let attachment), .responding(let attachment): attachment
        case .slicing(let progress): progress.fill
        default: nil
        }
    }

    /// The fill the exchange reads, if any.
    var fill: Fill? { attachment?.fill }

    /// The upstream transfer waits for request body bytes that had not arrived yet.
    var upstreamWaitsForBody: Bool {
        get { attachment?.bodyWanted ?? false }
        set { attachment?.bodyWanted = newValue }
    }

    /// A disk-tier body being sent a checked block at a time, as the state carries it.
    var diskBody: DiskBodyStream? {
        switch state {
        case .streamingDisk(let stream): stream
        case .slicing(let progress): progress.diskBody
        default: nil
        }
    }

    /// Puts the disk body's progress back into the state that carries it.
    func updateDiskBody(_ stream: DiskBodyStream) {
        switch state {
        case .streamingDisk:
            state = .streamingDisk(stream)
        case .slicing(var progress) where progress.diskBody != nil:
            progress.diskBody = stream
            state = .slicing(progress)
        default:
            break
        }
    }

    /// Whether the request body (if any) was read to its end.
    var requestBodyComplete: Bool { body?.isComplete ?? true }
}

/// How a response body is delimited towards the client.
enum ResponseFraming {
    case none
    case length(Int)
    case chunked
    /// Ends when the connection closes (HTTP/1.0 client, length unknown).
    case close
}

/// Reads a request body out of the connection's buffer according to its framing, for
/// streaming upstream.
struct RequestBodyReader {
    private var remaining: Int
    private var decoder: ChunkedDecoder?

    init(framing: BodyFraming) {
        switch framing {
        case .none:
            remaining = 0
        case .contentLength(let length):
            remaining = length
        case .chunked:
            remaining = 0
            decoder = ChunkedDecoder()
        }
    }

    var isComplete: Bool {
        if let decoder { return decoder.isComplete }
        return remaining == 0
    }

    /// Moves body bytes from `input` to `output`: returns (input consumed, output written).
    mutating func transfer(
        from input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(HTTPParseError) -> (consumed: Int, written: Int) {
        if decoder != nil {
            // Decoded output is never longer than the input it came from, so limiting the input
            // to the output's size keeps the sink within bounds.
            let slice = UnsafeRawBufferPointer(rebasing: input[0..<min(input.count, output.count)])
            var written = 0
            let consumed = try decoder!.decode(slice) { piece in
                UnsafeMutableRawBufferPointer(rebasing: output[written..<(written + piece.count)]).copyMemory(from: piece)
                written += piece.count
            }
            return (consumed, written)
        }
        let count = min(remaining, input.count, output.count)
        UnsafeMutableRawBufferPointer(rebasing: output[0..<count]).copyMemory(
            from: UnsafeRawBufferPointer(rebasing: input[0..<count]))
        remaining -= count
        return (count, count)
    }
}

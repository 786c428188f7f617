import Dispatch
import Foundation
import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream
import Logging

@testable import LarderServer

/// The fetch pipeline in process: a real ``EventLoop`` on its thread with a ``ProxyLoop`` on
/// it, fills that reach the origin through a ``FetchStandIn``, and readers that take the body
/// as a client connection would. Each step runs on the loop, and returns once the deferred
/// work it queued (readers being told of progress) has run too.
///
/// State: everything but the handle is touched only from jobs on the loop.
final class FillPipeline: @unchecked Sendable {
    /// A reader of a fill that takes every byte it is offered, as a client that keeps up.
    final class Reader: FillReader {
        let headers: HTTPHeaders
        private(set) var body: [UInt8] = []
        private(set) var released: FillRelease?
        private(set) var progressCalls = 0

        init(_ headers: HTTPHeaders = HTTPHeaders()) {
            self.headers = headers
        }

        func fillDidProgress(_ fill: Fill) -> Int? {
            progressCalls += 1
            var position = body.count
            while position < fill.readableBytes, case .memory(let bytes, let offset)? = fill.data(at: position) {
                body += bytes[offset...]
                position += bytes.count - offset
            }
            return position
        }

        func fillDidReceiveInterim(_ fill: Fill, head: ResponseHead) {}

        func fillReleased(_ fill: Fill, reason: FillRelease) {
            released = reason
        }
    }

    private let directory: String
    let runtime: RuntimeConfig
    let shared: SharedState
    private let handle: EventLoopHandle
    /// Loops that only count in the fill registry (`loops` > 1): nothing runs on them.
    private let others: [EventLoopHandle]
    private(set) var proxy: ProxyLoop!
    let standIn = FetchStandIn()

    /// With `loops` > 1 the fill registry is active, as with `proxy.workers` = `loops`: the
    /// pipeline's loop is loop 0, and the others only hold keys a test claims for them.
    init(loops: Int = 1, configure: (inout Config) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-fill-\(UUID().uuidString)").path
        var config = Config()
        config.disk.path = directory
        configure(&config)
        runtime = RuntimeConfig(config: config)
        shared = SharedState(runtime: runtime, logger: Logger(label: "fill-pipeline-test"))
        handle = try EventLoop.start(name: "fill-pipeline-test")
        others = try (1..<max(1, loops)).map { try EventLoop.start(name: "fill-pipeline-test-\($0)", index: $0) }
        if loops > 1 { shared.forwarding.fills.setLoops([handle] + others) }
        onLoop { pipeline, loop in pipeline.proxy = ProxyLoop(loop: loop, shared: pipeline.shared, runtime: pipeline.runtime) }
    }

    /// Lets go of the loop's objects on the loop, stops it, and removes the disk tier's folder.
    func close() {
        onLoop { pipeline, _ in pipeline.proxy = nil }
        handle.execute { $0.stop() }
        for other in others { other.execute { $0.stop() } }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `body` on the loop and waits for it and the deferred work it queued.
    @discardableResult
    func onLoop<T>(_ body: @escaping (FillPipeline, EventLoop) -> T) -> T {
        let job = UncheckedBox(body)
        let result = UncheckedBox<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        handle.execute { [self] loop in
            result.value = job.value(self, loop)
            done.signal()
        }
        precondition(done.wait(timeout: .now() + 10) == .success, "the loop did not run the step")
        // Deferred work runs at the end of the loop's turn: a second job comes after it.
        handle.execute { _ in done.signal() }
        precondition(done.wait(timeout: .now() + 10) == .success, "the loop did not finish the step")
        return result.value!
    }

    /// Waits, a bounded number of short turns, until `condition` holds on the loop.
    func waitFor(_ condition: @escaping (FillPipeline) -> Bool) -> Bool {
        for _ in 0..<200 {
            if onLoop({ pipeline, _ in condition(pipeline) }) { return true }
            usleep(10_000)
        }
        return false
    }

    static func url(_ path: String) -> AbsoluteURL {
        AbsoluteURL(scheme: "http", host: "origin.test", port: 80, pathAndQuery: path)
    }

    /// A fill for GET `path` that goes through the stand-in (not registered for others).
    func makeFill(_ path: String, headers: HTTPHeaders = HTTPHeaders(), options: FillOptions = FillOptions(), coalesceKey: FillKey?)
        -> Fill
    {
        let url = FillPipeline.url(path)
        return Fill(
            key: CacheKey(url), coalesceKey: coalesceKey, request: UpstreamRequest(method: .get, url: url, headers: headers),
            requestHeaders: headers, dedupAlways: false, options: options, settings: runtime.fill, proxy: proxy, starter: standIn)
    }

    /// What a client connection does for a miss: attaches `reader` to the fill in flight for
    /// GET `path` on this loop, or builds and starts one (``Coalescer/join(_:maxWaiters:reader:requestHeaders:)``).
    @discardableResult
    func join(_ reader: Reader, _ path: String, options: FillOptions = FillOptions()) -> Fill? {
        let key = FillKey(method: "GET", url: CacheKey(FillPipeline.url(path)).url, bodyHash: nil)
        switch proxy.coalescer.join(key, maxWaiters: runtime.config.coalesce.maxWaiters, reader: reader, requestHeaders: reader.headers) {
        case .attached(let fill):
            return fill
        case .start(let registered):
            let fill = makeFill(path, headers: reader.headers, options: options, coalesceKey: registered)
            proxy.coalescer.start(fill, firstReader: reader, requestHeaders: reader.headers)
            return fill
        case .elsewhere:
            return nil
        }
    }
}

/// Carries a value the test hands to the loop thread and back, one at a time.
final class UncheckedBox<Value>: @unchecked Sendable {
    var value: Value

    init(_ value: Value) {
        self.value = value
    }
}

import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream
import Testing

@testable import LarderServer

/// The pipeline around a ``Fill`` in process, the origin a ``FetchStandIn`` that answers when
/// the test says: coalescing, release, stale-if-error, retries, slices and the storage plan.
@Suite(.timeLimit(.minutes(1))) struct FillPipelineTests {
    static let hello: [UInt8] = Array("hello".utf8)

    @Test func readersThatJoinWhileTheFetchIsInFlightShareOneFetch() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let readers = (0..<3).map { _ in FillPipeline.Reader() }
        let fills = pipeline.onLoop { pipeline, _ in readers.map { pipeline.join($0, "/shared") } }
        #expect(fills.allSatisfy { $0 != nil && $0 === fills[0] })
        #expect(pipeline.onLoop { pipeline, _ in pipeline.standIn.calls } == 1)
        pipeline.onLoop { pipeline, _ in
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Cache-Control", "max-age=60"), ("Content-Length", "5")])
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
        }
        let (bodies, calls, succeeded) = pipeline.onLoop { pipeline, _ in
            (readers.map(\.body), pipeline.standIn.calls, fills[0].map { if case .success? = $0.outcome { true } else { false } })
        }
        #expect(bodies == Array(repeating: FillPipelineTests.hello, count: 3))
        #expect(calls == 1)
        #expect(succeeded == true)
        // The fill has left the coalescer: the next request starts a fetch of its own.
        let next = FillPipeline.Reader()
        pipeline.onLoop { pipeline, _ in pipeline.join(next, "/shared") }
        #expect(pipeline.onLoop { pipeline, _ in pipeline.standIn.calls } == 2)
    }

    @Test func theStoragePlanPutsACompleteCacheableBodyInTheMemoryTier() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let reader = FillPipeline.Reader()
        let key = CacheKey(FillPipeline.url("/stored"))
        let stored: (Bool, [UInt8]?) = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.join(reader, "/stored")
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Cache-Control", "max-age=60"), ("Content-Length", "5")])
            let before = pipeline.shared.storage.cache.holds(key)
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
            guard fill?.willStore == true,
                case .found(let response, fromDisk: false) = pipeline.shared.storage.cache.lookup(key, request: HTTPHeaders()),
                case .memory(let bytes) = response.body
            else { return (before, nil) }
            return (before, bytes)
        }
        #expect(stored.0 == false)
        #expect(stored.1 == FillPipelineTests.hello)
    }

    /// With several loops a fill's key is released in the fill's pass after its end, once the
    /// body is stored: a request on another loop in between is sent to this loop (where the
    /// stored response answers it), never left to fetch the key again; a request on this loop in
    /// between no longer finds the ended fill, and claims the key for a fill of its own.
    @Test func anEndedFillHoldsItsKeyUntilItsPassWithTheBodyStored() throws {
        let pipeline = try FillPipeline(loops: 2)
        defer { pipeline.close() }
        let key = FillKey(method: "GET", url: CacheKey(FillPipeline.url("/ending")).url, bodyHash: nil)
        let first = FillPipeline.Reader()
        let next = FillPipeline.Reader()
        let during: (held: Bool, stored: Bool, offered: Bool, calls: Int) = pipeline.onLoop { pipeline, _ in
            pipeline.join(first, "/ending")
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Cache-Control", "max-age=60"), ("Content-Length", "5")])
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
            // The end ran; its pass has not.
            let held = pipeline.shared.forwarding.fills.owner(of: key, besides: 1) != nil
            let stored = pipeline.shared.storage.cache.holds(CacheKey(FillPipeline.url("/ending")))
            let offered = pipeline.proxy.coalescer.fill(for: key) != nil
            return (held, stored, offered, pipeline.standIn.calls)
        }
        #expect(during == (true, true, false, 1), "held for the other loop, stored, no longer offered here")
        let after: (owner: Bool, calls: Int, body: [UInt8]) = pipeline.onLoop { pipeline, _ in
            (pipeline.shared.forwarding.fills.owner(of: key, besides: 1) != nil, pipeline.standIn.calls, first.body)
        }
        #expect(after == (false, 1, FillPipelineTests.hello), "released after the pass")
        // The same window on the fill's own loop: the next request claims the key for a fill of
        // its own, which the ended fill's pass leaves registered.
        let againKey = FillKey(method: "GET", url: CacheKey(FillPipeline.url("/again")).url, bodyHash: nil)
        let started: Fill? = pipeline.onLoop { pipeline, _ in
            pipeline.join(FillPipeline.Reader(), "/again")
            let transfer = pipeline.standIn.transfers[1]
            transfer.head(200, [("Cache-Control", "max-age=60"), ("Content-Length", "5")])
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
            return pipeline.join(next, "/again")
        }
        let kept: (registered: Bool, held: Bool, calls: Int) = pipeline.onLoop { pipeline, _ in
            (
                started != nil && pipeline.proxy.coalescer.fill(for: againKey) === started,
                pipeline.shared.forwarding.fills.owner(of: againKey, besides: 1) != nil, pipeline.standIn.calls
            )
        }
        #expect(kept == (true, true, 3), "a fill of its own, registered past the ended fill's pass")
    }

    @Test func aResponseThatMayNotBeStoredIsServedButNotStored() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let reader = FillPipeline.Reader()
        let key = CacheKey(FillPipeline.url("/private"))
        let held = pipeline.onLoop { pipeline, _ in
            pipeline.join(reader, "/private")
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Cache-Control", "no-store"), ("Content-Length", "5")])
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
            return pipeline.shared.storage.cache.holds(key)
        }
        #expect(!held)
        #expect(pipeline.onLoop { _, _ in reader.body } == FillPipelineTests.hello)
    }

    @Test func aReaderWhoseRequestSelectsAnotherVariantIsReleased() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let gzip = FillPipeline.Reader(["Accept-Encoding": "gzip"])
        let sameGzip = FillPipeline.Reader(["Accept-Encoding": "gzip"])
        let identity = FillPipeline.Reader(["Accept-Encoding": "identity"])
        pipeline.onLoop { pipeline, _ in
            for reader in [gzip, sameGzip, identity] { pipeline.join(reader, "/varies") }
            pipeline.standIn.transfers[0].head(
                200, [("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding"), ("Content-Length", "5")])
        }
        let (released, calls) = pipeline.onLoop { pipeline, _ in
            ([gzip, sameGzip, identity].map { reader in reader.released.map { "\($0)" } }, pipeline.standIn.calls)
        }
        #expect(released[0] == nil)
        #expect(released[1] == nil)
        #expect(released[2] == "\(FillRelease.otherVariant(["accept-encoding"]))")
        #expect(calls == 1)
    }

    @Test func aStaleStoredAnswerStandsInWhenTheOriginCannotBeReached() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let url = FillPipeline.url("/stale")
        // Fresh for 60 s, stored 120 s ago: stale, within the default stale-if-error window.
        let stale = StoredResponse(
            key: CacheKey(url), status: 200, reason: "OK", headers: ["Cache-Control": "max-age=60"],
            body: .memory(FillPipelineTests.hello), requestTime: Clocks.wallSeconds() - 120,
            responseTime: Clocks.wallSeconds() - 120, freshnessLifetime: 60, correctedInitialAge: 0)
        let options = FillOptions()
        options.fallback = stale
        let reader = FillPipeline.Reader()
        let (answer, succeeded, calls) = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.join(reader, "/stale", options: options)
            // A name that does not resolve is not retried: the failure is final at once.
            pipeline.standIn.transfers[0].fail(.dns)
            let succeeded = if case .success? = fill?.outcome { true } else { false }
            return (fill?.staleAnswer, succeeded, pipeline.standIn.calls)
        }
        #expect(answer === stale)
        #expect(succeeded)
        #expect(calls == 1)
        #expect(pipeline.shared.telemetry.stats[.staleServedOnError].load() == 1)
    }

    @Test func anAttemptThatCouldNotConnectIsRetried() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        var retry = RetryConfig()
        retry.baseDelay = .milliseconds(1)
        retry.jitter = .zero
        let options = FillOptions()
        options.retry = RetryPolicy(retry)
        let reader = FillPipeline.Reader()
        let fill = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.join(reader, "/retried", options: options)
            pipeline.standIn.transfers[0].fail(.connect)
            return fill
        }
        #expect(fill != nil)
        try #require(pipeline.waitFor { $0.standIn.calls == 2 }, "the retry never started")
        let (attempts, retries) = pipeline.onLoop { pipeline, _ in
            let transfer = pipeline.standIn.transfers[1]
            transfer.head(200, [("Content-Length", "5")])
            transfer.body(FillPipelineTests.hello)
            transfer.finish(bodyBytes: 5)
            return (fill?.attempts, fill?.retryLog.map { "\($0.reason):\($0.delayMillis)" })
        }
        // The reader hears of the body after the loop's turn.
        let body = pipeline.onLoop { _, _ in reader.body }
        #expect(attempts == 2)
        #expect(retries == ["connect:1"])
        #expect(body == FillPipelineTests.hello)
        #expect(pipeline.onLoop { pipeline, _ in pipeline.standIn.calls } == 2)
    }

    @Test func aSliceFillAnswersWithTheSlicesPartialContent() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let options = FillOptions()
        options.slice = (index: 1, size: 4)
        let reader = FillPipeline.Reader()
        let (status, range) = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.join(reader, "/sliced", options: options)
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(206, [("Cache-Control", "max-age=60"), ("Content-Range", "bytes 4-7/10"), ("Content-Length", "4")])
            transfer.body(Array("4567".utf8))
            transfer.finish(bodyBytes: 4)
            return (fill?.head?.status, fill?.head?.headers["Content-Range"])
        }
        let body = pipeline.onLoop { _, _ in reader.body }
        #expect(status == 206)
        #expect(range == "bytes 4-7/10")
        #expect(body == Array("4567".utf8))
    }

    /// A reader that takes at most `limit` body bytes, as a client whose output is full.
    final class PartReader: FillReader {
        let limit: Int
        private(set) var calls = 0

        init(limit: Int) {
            self.limit = limit
        }

        func fillDidProgress(_ fill: Fill) -> Int? {
            calls += 1
            return min(limit, fill.readableBytes)
        }

        func fillDidReceiveInterim(_ fill: Fill, head: ResponseHead) {}
        func fillReleased(_ fill: Fill, reason: FillRelease) {}
    }

    /// The fill tells each reader once per batch of transfer events (not when it attaches to a
    /// fill that has nothing yet), and records the position each answers with: no call back.
    @Test func eachReaderIsToldOncePerBatchAndAnswersWithItsPosition() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let whole = FillPipeline.Reader()
        let part = PartReader(limit: 2)
        // Each step's deferred work (the fill telling its readers) has run when the next starts.
        pipeline.onLoop { pipeline, _ in
            let fill = pipeline.join(whole, "/batch")
            fill?.attach(part, requestHeaders: HTTPHeaders())
        }
        let attached = pipeline.onLoop { _, _ in (whole.progressCalls, part.calls) }
        #expect(attached == (0, 0), "nothing to tell yet")
        pipeline.onLoop { pipeline, _ in
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Cache-Control", "max-age=60"), ("Content-Length", "10")])
            transfer.body(Array("01234".utf8))
            transfer.body(Array("56789".utf8))
        }
        let told = pipeline.onLoop { _, _ in (whole.progressCalls, part.calls) }
        #expect(told == (1, 1), "head and two bodies: one batch")
        let positions = pipeline.onLoop { pipeline, _ in
            pipeline.proxy.coalescer.fill(for: FillKey(method: "GET", url: CacheKey(FillPipeline.url("/batch")).url, bodyHash: nil))?
                .buffer.readers.map(\.position)
        }
        #expect(positions == [10, 2])
        #expect(pipeline.onLoop { _, _ in whole.body } == Array("0123456789".utf8))
    }

    /// A reader whose response ended in the fill's pass answers that it left (nil) without
    /// detaching itself: the pass removes it, the others stay, and a reader that did detach
    /// itself is not removed twice.
    @Test func aReaderThatAnswersItLeftIsRemovedByThePass() throws {
        let pipeline = try FillPipeline()
        defer { pipeline.close() }
        let leaving = LeavingReader(after: 10, detaches: false)
        let detached = LeavingReader(after: 10, detaches: true)
        let part = PartReader(limit: 2)
        let fill = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.makeFill("/left", coalesceKey: nil)
            for reader in [leaving, detached, part] as [any FillReader] { fill.attach(reader, requestHeaders: HTTPHeaders()) }
            fill.start(firstReader: nil, requestHeaders: HTTPHeaders())
            return UncheckedBox(fill)
        }
        pipeline.onLoop { pipeline, _ in
            let transfer = pipeline.standIn.transfers[0]
            transfer.head(200, [("Content-Length", "10"), ("Cache-Control", "max-age=60")])
            transfer.body(Array("0123456789".utf8))
        }
        let after = pipeline.onLoop { _, _ in
            (fill.value.buffer.readers.count, fill.value.buffer.readers.first?.reader === part, leaving.taken, detached.taken)
        }
        #expect(after.0 == 1, "only the reader still reading is left")
        #expect(after.1 == true)
        #expect(after.2 == 10 && after.3 == 10)
        #expect(pipeline.onLoop { _, _ in fill.value.outcome == nil }, "the fill goes on for the reader left")

        // Alone, the reader leaving by its answer leaves the fill with no reader, as a detach
        // would (here the stand-in's head declares no length, so the fill is cancelled: every
        // client left).
        let alone = LeavingReader(after: 4, detaches: false)
        let single = pipeline.onLoop { pipeline, _ in
            let fill = pipeline.makeFill("/alone", coalesceKey: nil)
            fill.attach(alone, requestHeaders: HTTPHeaders())
            fill.start(firstReader: nil, requestHeaders: HTTPHeaders())
            return UncheckedBox(fill)
        }
        pipeline.onLoop { pipeline, _ in
            let transfer = pipeline.standIn.transfers[1]
            transfer.head(200, [("Cache-Control", "max-age=60")])
            transfer.body(Array("abcd".utf8))
        }
        let emptied = pipeline.onLoop { _, _ in (single.value.buffer.readers.isEmpty, single.value.outcome != nil) }
        #expect(emptied == (true, true))
    }

    /// A reader that takes the body and, once it has `after` bytes, answers that it left, as a
    /// connection whose response ended in the pass; `detaches`: it detaches itself first, as a
    /// connection that left the fill another way.
    final class LeavingReader: FillReader {
        let after: Int
        let detaches: Bool
        private(set) var taken = 0

        init(after: Int, detaches: Bool) {
            self.after = after
            self.detaches = detaches
        }

        func fillDidProgress(_ fill: Fill) -> Int? {
            taken = min(after, fill.readableBytes)
            guard taken == after else { return taken }
            if detaches { fill.detach(self) }
            return nil
        }

        func fillDidReceiveInterim(_ fill: Fill, head: ResponseHead) {}
        func fillReleased(_ fill: Fill, reason: FillRelease) {}
    }
}

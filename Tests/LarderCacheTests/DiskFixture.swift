import Foundation
import LarderHTTP
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderCache

/// Waits (at most 10 s) for `cache`'s start-up scan to finish.
func waitForIndex(_ cache: DiskCache) {
    for _ in 0..<10_000 where !cache.isIndexComplete { usleep(1000) }
    #expect(cache.isIndexComplete, "start-up scan finished within 10 s")
}

/// A disk cache in a fresh directory, removed when the test ends.
final class DiskFixture {
    let directory: String
    let cache: DiskCache

    /// `directory`: where the cache lives (default: a new one under the temporary directory).
    init(maxBytes: Int64 = 1 << 30, maxObjectBytes: Int64 = 1 << 30, directory: String? = nil) throws {
        self.directory = directory ?? NSTemporaryDirectory() + "larder-disk-" + UUID().uuidString
        cache = try DiskCache(
            directory: self.directory, limits: .init(maxBytes: maxBytes, maxObjectBytes: maxObjectBytes),
            logger: Logger(label: "test"))
        // No write counts as slow: on a loaded machine one descheduled write (over 10 ms) would
        // send every inline store to the writer for 30 s, and the tests expecting them to be
        // stored at once would fail. The back-off's own test sets the threshold itself.
        cache.slowInlineWrite.store(.max, ordering: .relaxed)
        cache.start()
        waitForIndex(cache)
        cache.drain()  // start-up's clean-up and eviction jobs, which inline stores wait behind
    }

    /// Stores `body` under `path` and waits until it is on disk.
    @discardableResult
    func store(_ path: String, body: [UInt8], vary: [String: String] = [:], responseTime: Double = 101, chunk: Int = 7000) -> Bool {
        let key = Fixtures.key(path)
        guard
            let write = cache.beginWrite(
                key: key,
                head: DiskEntryFormat.Head(
                    key: key.url, status: 200, reason: "OK", requestTime: responseTime - 1, responseTime: responseTime, vary: vary,
                    headers: ["Cache-Control": "max-age=60", "Content-Type": "application/octet-stream"]),
                expectedLength: body.count)
        else { return false }
        var offset = 0
        while offset < body.count {
            write.append(Array(body[offset..<min(body.count, offset + chunk)]))
            offset += chunk
        }
        write.finish(expectedLength: body.count)
        cache.drain()
        return !write.hasFailed
    }

    /// Reads a hit's body through its open file; verifies unverified entries first.
    func read(_ path: String, request: HTTPHeaders = [:]) -> [UInt8]? {
        LarderCacheTests.read(cache, path, request: request)
    }

    /// Holds the writer thread until the returned semaphore is signalled: jobs queue behind.
    func holdWriter() -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        cache.writer.submit { gate.wait() }
        return gate
    }

    /// The segment files under v1/seg/.
    func segmentFiles() -> [String] {
        entryFiles().filter { $0.contains("/v1/\(DiskSegments.directoryName)/") }.sorted()
    }

    /// All entry files under v1/.
    func entryFiles() -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory + "/v1")
        var files: [String] = []
        while let next = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory + "/v1/" + next, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(directory + "/v1/" + next)
            }
        }
        return files
    }

    /// `scanning`: start the new cache (its start-up scan); without, it stays as one whose scan
    /// has reached nothing yet.
    func reopen(scanning: Bool = true) throws -> DiskCache {
        cache.stop()
        let fresh = try DiskCache(directory: directory, limits: cache.currentLimits, logger: Logger(label: "test"))
        fresh.slowInlineWrite.store(.max, ordering: .relaxed)
        if scanning { fresh.start() }
        return fresh
    }

    deinit {
        cache.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Reads a hit's body from `cache` through its open file; verifies unverified entries first.
func read(_ cache: DiskCache, _ path: String, request: HTTPHeaders = [:]) -> [UInt8]? {
    hit(cache, path, request: request).flatMap { checkedBody(cache, $0) }
}

/// What a client's lookup of `path` finds, as the server gets it: at once on the loop, or
/// from the reader thread's check (an entry file not kept open, a body checked whole there).
func hit(_ cache: DiskCache, _ path: String, request: HTTPHeaders = [:]) -> StoredResponse? {
    hit(cache, key: Fixtures.key(path), request: request)
}

/// ``hit(_:_:request:)`` for any key (a slice's).
func hit(_ cache: DiskCache, key: CacheKey, request: HTTPHeaders = [:]) -> StoredResponse? {
    var byName = true
    for _ in 0..<2 {
        switch cache.lookup(key, request: request, byName: byName) {
        case .miss:
            return nil
        case .hit(let stored):
            return stored
        case .unverified(let name):
            byName = false
            switch verified(cache, name, key: key) {
            case .sound(let checked?, _): return checked
            case .sound(nil, _): continue
            default: return nil
            }
        }
    }
    return nil
}

/// The reader thread's check of the entry `name` of `key`, waited for.
func verified(_ cache: DiskCache, _ name: EntryName, key: CacheKey) -> DiskCache.Verification? {
    waitForCheck { cache.verify(name, key: key, completion: $0) }
}

/// ``verified(_:_:key:)`` through the tiers' face (the outcome carries its stamp).
func verified(_ tiers: TieredCache, _ name: EntryName, key: CacheKey) -> DiskCache.Verification? {
    waitForCheck { tiers.verify(name, key: key, completion: $0) }
}

private func waitForCheck(_ start: (@escaping @Sendable (DiskCache.Verification) -> Void) -> Void) -> DiskCache.Verification? {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<DiskCache.Verification?>(nil)
    start { verification in
        result.withLock { $0 = verification }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }
}

/// A hit's body as a client gets it: a file-backed one read block by block, each checked
/// (nil when one fails its check).
func checkedBody(_ cache: DiskCache, _ stored: StoredResponse) -> [UInt8]? {
    guard case .file(_, _, let length, _) = stored.body else { return stored.memoryBody }
    var bytes: [UInt8] = []
    for block in 0..<DiskEntryFormat.blockCount(bodyLength: length) {
        guard case .checked(let checked) = cache.readCheckedBlock(of: stored, block: block) else { return nil }
        bytes += checked
    }
    return bytes
}

/// A stored response's body, wherever it lives.
func body(of stored: StoredResponse) -> [UInt8]? {
    if case .file(let file, let offset, let length, _) = stored.body {
        return try? FileSystem.read(file.fd, at: offset, count: Int(length))
    }
    return stored.memoryBody
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? -1
}

/// `count` bytes where byte `i` is `i * 31 + seed` (modulo 256): a 256-byte ramp, repeated by
/// copying it. Built byte by byte, the bodies of several MiB took tens of seconds of the test
/// process's two threads under ThreadSanitizer, and every test waiting behind them ran out of time.
func pattern(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
    let ramp = (0..<256).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count { bytes += ramp.prefix(count - bytes.count) }
    return bytes
}

/// A complete in-memory response for `path` with `body`.
func complete(_ path: String, body: [UInt8]) -> (StoredResponse, DiskEntryFormat.Head) {
    let stored = Fixtures.response(path, responseTime: 101).withBody(.memory(body))
    let head = DiskEntryFormat.Head(
        key: stored.key.url, status: 200, reason: "OK", requestTime: 100, responseTime: 101, vary: [:],
        headers: ["Cache-Control": "max-age=60"])
    return (stored, head)
}

/// Rewrites the fixture's first segment file through `edit` (damage, as a crash or a bad
/// disk would leave it); returns its path.
@discardableResult
func editFirstSegment(_ fixture: DiskFixture, _ edit: (inout Data) throws -> Void) throws -> String {
    let segment = try #require(fixture.segmentFiles().first)
    var bytes = try Data(contentsOf: URL(fileURLWithPath: segment))
    try edit(&bytes)
    try bytes.write(to: URL(fileURLWithPath: segment))
    return segment
}

/// Stores each path inline, in order, with a body of `size` bytes from its seed.
func storeInline(_ fixture: DiskFixture, _ entries: [(path: String, seed: UInt8)], size: Int) {
    for (path, seed) in entries {
        let (stored, head) = complete(path, body: pattern(size, seed: seed))
        #expect(fixture.cache.storeInline(stored, head: head), "\(path) stored")
    }
}

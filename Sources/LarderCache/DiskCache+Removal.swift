import Glibc
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// Removal and rewrites: entries dropped, purged, found damaged, or given a revalidated head.
extension DiskCache {
    /// Deletes what removed index entries stored (writer thread): a record is marked freed in
    /// its segment (and segments left without live records go); a file is unlinked unless its
    /// name holds a newer file by now (written and renamed over it since the removal). Clients
    /// still sending an old body keep their descriptor and bytes either way.
    func dispose(_ removed: [DiskIndex.Entry]) {
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        var freedRecords = false
        for entry in removed {
            if entry.segment != 0 {
                segments.markFreed(entry.segment, at: entry.offset)
                freedRecords = true
            } else {
                // Replaced (renamed over) or removed: a kept descriptor holds the old file.
                openFiles.forget(entry.name)
                if index.withLock({ $0.entry(named: entry.name)?.segment }) != 0 {
                    try? FileSystem.remove(at: entries, relativePath(forName: entry.name))
                }
            }
        }
        if freedRecords { reclaimEmptySegments() }
    }

    /// Drops `entry` after reading it failed with `error`, if the index still holds that very
    /// entry. An entry that is simply gone (deleted by hand, purged or evicted since it was
    /// listed or indexed) only leaves the index; anything else is corruption: counted, logged
    /// and deleted. Returns whether it was.
    @discardableResult
    func discard(_ entry: DiskIndex.Entry, after error: any Error) -> Bool {
        if let error = error as? SystemError, DiskCache.isExhaustion(error.errno) {
            // Out of descriptors or memory (a flood of connections can do it): the entry is
            // sound, only this read failed. Kept, not counted; the request goes upstream.
            if DiskCache.isLogDue(lastExhaustionLog) {
                logger.warning(
                    "cannot read a disk cache entry for now; served from upstream",
                    metadata: ["error": "\(error)", "advice": "raise LimitNOFILE or lower proxy.max_connections"])
            }
            return false
        }
        let removed = index.withLock { index -> DiskIndex.Entry? in
            guard let current = index.entry(named: entry.name), current.segment == entry.segment,
                current.offset == entry.offset
            else { return nil }
            return index.remove(named: entry.name)
        }
        if let error = error as? SystemError, error.errno == ENOENT { return false }
        let doomed = removed ?? entry
        if let problem = error as? DiskEntryFormat.Problem, problem.isOlderFormat {
            // Written by an older Larder (DISK-FORMAT.md, "Versions"): not damage, just dropped.
            logger.debug("dropping a disk cache entry of an older format", metadata: ["reason": "\(problem)"])
            writer.submit { [self] in dispose([doomed]) }
            return true
        }
        corruptions.add(1)
        let place =
            entry.segment == 0
            ? path(forName: entry.name) : "\(directory)/v1/\(DiskSegments.relativePath(entry.segment)) at \(entry.offset)"
        logger.warning("dropping corrupt disk cache entry", metadata: ["file": "\(place)", "reason": "\(error)"])
        writer.submit { [self] in dispose([doomed]) }
        return true
    }

    /// Whether `errno` says the process ran out of something (descriptors, memory), not
    /// that the entry is damaged.
    static func isExhaustion(_ errno: Int32) -> Bool {
        errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == EAGAIN
    }

    /// ``discard(_:after:)`` for an entry file the index does not hold (yet): the start-up
    /// scan's and the by-name lookup's.
    @discardableResult
    func discard(_ name: EntryName, after error: any Error) -> Bool {
        discard(DiskCache.unindexedFile(name), after: error)
    }

    /// Rewrites the head of the entry `refreshed` replaces (same key and variant) after a
    /// revalidation (RFC 9111 §4.3.4), on the writer thread: the body is copied into a new
    /// record (appended to a segment) or a new file (renamed over the old one), and the old
    /// record is freed. Nothing happens if the entry is gone, holds another body than
    /// `original`'s, the response validated (``StoredResponse/holdsBody(of:)``: one stored since
    /// would get the validated response's fields over its own body), holds a refresh of it that
    /// arrived later, when the refresh is indexed (``DiskIndex/insert(refresh:)``: a record a
    /// loop stored while the body was copied counts), or a purge or ban since `stamp` (when
    /// the revalidation began) covers it. A refresh the index refuses drops the memory tier's
    /// copy of it (``superseded(_:)``), so both tiers answer with what the disk holds.
    public func refresh(_ refreshed: StoredResponse, of original: StoredResponse, stamp: InvalidationLog.Stamp? = nil) {
        let name = DiskCache.entryName(key: refreshed.key, vary: refreshed.varyValues)
        let path = path(forName: name)
        var headers = refreshed.headers
        headers.remove("Age")
        let head = DiskEntryFormat.Head(
            key: refreshed.key.url, status: refreshed.status, reason: refreshed.reason,
            requestTime: refreshed.requestTime, responseTime: refreshed.responseTime, bodyTime: original.bodyTime,
            vary: refreshed.varyValues,
            headers: headers, url: refreshed.url)
        let temporary = temporaryPath(name, suffix: "refresh")
        writer.submit { [self] in
            guard invalidations.allows(refreshed.key, since: stamp), let current = index.withLock({ $0.entry(named: name) })
            else { return }
            do {
                let old = try loadHead(current)
                guard old.head.key == refreshed.key.url, StoredResponse.sameArrival(old.head.bodyArrival, original.bodyTime)
                else { return }
                // The body stays, and so does the format its checksum was computed in.
                var head = head
                head.version = old.head.version
                let entryHead = DiskEntryFormat.entryHead(
                    head, bodyLength: old.head.bodyLength, bodyChecksum: old.head.bodyChecksum)
                let entry = DiskIndex.Entry(
                    key: refreshed.key, vary: refreshed.varyValues, name: name,
                    size: Int64(entryHead.count) + old.head.bodyLength + old.head.tableLength,
                    responseTime: refreshed.responseTime, bodyTime: original.bodyTime)
                if old.head.bodyLength <= DiskCache.inlineLimit {
                    // A record of up to 4 KiB came whole with its head.
                    let body =
                        try old.readBody.map(Array.init)
                        ?? FileSystem.read(old.file.fd, at: old.bodyOffset, count: Int(old.head.bodyLength))
                    guard body.count == Int(old.head.bodyLength) else {
                        throw DiskEntryFormat.Problem.truncated(expected: old.head.bodyLength, actual: Int64(body.count))
                    }
                    refreshWillLand.withLock { $0 }?()
                    appendRecord(entry, head: entryHead, body: body, stamp: stamp, refresh: true)
                    return
                }
                let fd = try FileSystem.createExclusive(temporary)
                defer { Syscall.close(fd) }
                try FileSystem.writeAll(fd, entryHead)
                // The body and its block table, as they are: their checksums stay.
                var offset = old.bodyOffset
                let end = old.bodyOffset + old.head.bodyLength + old.head.tableLength
                while offset < end {
                    let chunk = try FileSystem.read(old.file.fd, at: offset, count: Int(min(1 << 20, end - offset)))
                    if chunk.isEmpty { throw DiskEntryFormat.Problem.truncated(expected: end, actual: offset) }
                    try FileSystem.writeAll(fd, chunk)
                    offset += Int64(chunk.count)
                }
                // Purged meanwhile, or the name holds another body (a record a loop appended
                // while the body was copied) or a later refresh: not renamed over what the index
                // holds now. The same is asked again as the file is indexed, under the lock.
                refreshWillLand.withLock { $0 }?()
                guard invalidations.allows(refreshed.key, since: stamp) else {
                    try? FileSystem.remove(temporary)
                    return
                }
                guard index.withLock({ $0.accepts(refresh: entry) }) else {
                    try? FileSystem.remove(temporary)
                    superseded(entry)
                    return
                }
                try FileSystem.rename(temporary, path)
                didStore(entry, evict: false, stamp: stamp, refresh: true)
            } catch {
                try? FileSystem.remove(temporary)
            }
        }
    }

    /// Removes one stored variant.
    public func remove(_ stored: StoredResponse) {
        remove(named: DiskCache.entryName(key: stored.key, vary: stored.varyValues)) { _ in false }
    }

    /// Removes the entry of `newer`'s variant (`vary`) when it arrived no later than `newer`,
    /// a response the memory tier took and this tier cannot (over `max_object_bytes`): kept, it
    /// would answer again, older than what memory holds, after a restart or once memory lets the
    /// newer one go.
    func removeOlder(than newer: StoredResponse, vary: [String: String]) {
        remove(named: DiskCache.entryName(key: newer.key, vary: vary)) { held in
            held.arrived(after: newer.responseTime, now: Clocks.wallSeconds)
        }
    }

    /// Removes the entry `name` unless `keeping` it, on the writer thread. While the start-up
    /// scan runs, an entry the index does not hold yet may be a file it has not reached: one
    /// stored before this process began, which goes too.
    private func remove(named name: EntryName, keeping: (DiskIndex.Entry) -> Bool) {
        let (indexed, entry) = index.withLock { index -> (Bool, DiskIndex.Entry?) in
            guard let held = index.entry(named: name) else { return (false, nil) }
            return (true, keeping(held) ? nil : index.remove(named: name))
        }
        let doomed = entry.map { [$0] } ?? (!indexed && !isIndexComplete ? [DiskCache.unindexedFile(name)] : [])
        guard !doomed.isEmpty else { return }
        writer.submit { [self] in dispose(doomed) }
    }

    /// Whether the index holds an entry for `key` (any variant); no file is touched.
    public func isIndexed(_ key: CacheKey) -> Bool {
        !index.withLock { $0.lookup(key) }.isEmpty
    }

    /// Removes every stored variant of `key`. Returns whether anything was stored.
    @discardableResult
    public func purge(_ key: CacheKey) -> Bool {
        let direct = DiskCache.entryName(key: key, vary: [:])
        var removed = index.withLock { index in
            let removed = index.remove(key: key)
            // While the start-up scan runs, the key's entry without Vary may be a file it has
            // not indexed yet: its name is tombstoned as well (`remove(named:)`), so that
            // neither the scan nor a lookup on the reader thread indexes it again before the
            // writer deletes it.
            index.remove(named: direct)
            return removed
        }
        if !isIndexComplete && !removed.contains(where: { $0.name == direct }) && access(path(forName: direct), F_OK) == 0 {
            removed.append(DiskCache.unindexedFile(direct))
        }
        let doomed = removed
        writer.submit { [self] in dispose(doomed) }
        return !removed.isEmpty
    }

    /// Removes every indexed slice of the object `key` (``CacheKey/slice(_:)``), whatever slice
    /// size cut it, but `keeping`: linear in the number it has. Returns whether any was stored.
    /// Slices the start-up scan has not indexed yet are not seen (``isIndexComplete``).
    @discardableResult
    public func purgeSlices(of key: CacheKey, keeping: CacheKey? = nil) -> Bool {
        guard slicesInserted.load() > 0 else { return false }
        let removed = index.withLock { $0.removeSlices(of: key, keeping: keeping) }
        guard !removed.isEmpty else { return false }
        writer.submit { [self] in dispose(removed) }
        return true
    }

    /// Removes every indexed entry whose key `matches` (a ban), walking the index in spans so
    /// the loops are not stalled; the files and records go on the writer thread. Returns the
    /// keys removed. Entries the start-up scan has not indexed yet are not seen
    /// (``isIndexComplete``).
    public func remove(matching matches: @Sendable (CacheKey) -> Bool) -> [CacheKey] {
        var removed: [DiskIndex.Entry] = []
        var start: Int? = 0
        while let from = start {
            let (batch, next) = index.withLock { $0.remove(matching: matches, from: from, span: DiskCache.listSpan) }
            removed += batch
            start = next
        }
        let doomed = removed
        if !doomed.isEmpty { writer.submit { [self] in dispose(doomed) } }
        return removed.map(\.key)
    }

    /// An index entry standing for the file `name`, which the index does not hold.
    static func unindexedFile(_ name: EntryName) -> DiskIndex.Entry {
        DiskIndex.Entry(key: CacheKey(normalized: ""), vary: [:], name: name, size: 0, responseTime: 0, bodyTime: 0)
    }

    /// Removes everything: the entry tree is renamed away at once and deleted in the background.
    public func removeAll() {
        _ = index.withLock { $0.removeAll() }
        openFiles.forgetAll()
        let trash = "\(directory)/trash-\(getpid())-\(trashCounter.add(1, ordering: .relaxed).newValue)"
        writer.submit { [self] in
            do {
                try FileSystem.rename(directory + "/v1", trash)
                try FileSystem.makeDirectories(directory + "/v1")
                let fresh = try FileSystem.openDirectory(directory + "/v1", refusingLink: true)
                defer { Syscall.close(fresh) }
                try FileSystem.replaceDescriptor(entriesDirectoryFD.load(ordering: .acquiring), with: fresh)
                // A store that took an appender before this keeps writing to a segment that is
                // now in the trash; its entry then reads as gone.
                segments.reset()
            } catch {
                logger.error("cannot clear the disk cache", metadata: ["error": "\(error)"])
                return
            }
            FileSystem.removeTree(trash)
            openFiles.forgetAll()  // any kept by a check that opened an old file meanwhile
        }
    }
}

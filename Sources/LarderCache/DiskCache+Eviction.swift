import Glibc
import LarderHTTP
import LarderIO
import Logging

/// Keeping the tier under `disk.max_bytes`, on the writer thread: empty segments deleted,
/// sparse ones compacted, then least recently used entries evicted (DISK-FORMAT.md, "Space").
extension DiskCache {
    /// Keeps the tier under `disk.max_bytes`, with hysteresis: past the limit, down to 90% of
    /// it. Segments without live records are deleted, and a segment at most half live is
    /// compacted (its live records copied to an open segment) before any entry is evicted;
    /// then least recently used entries go. Evicting records only frees space once their
    /// segment empties or is compacted, so this repeats until the bytes on disk are down.
    /// Writer thread.
    func evictIfNeeded() {
        let maxBytes = limits.withLock { $0.maxBytes }
        guard index.withLock({ $0.physicalBytes }) > maxBytes else { return }
        let target = DiskCache.evictionTarget(maxBytes)
        var evictedCount = 0
        var sealed = false
        // Each round frees a segment or evicts entries; bounded all the same.
        for _ in 0..<10_000 {
            let excess = index.withLock { $0.physicalBytes } - target
            if excess <= 0 { break }
            if reclaimEmptySegments() { continue }
            let skipped = uncompactable.withLock { $0 }
            if let sparse = index.withLock({ $0.sparsestSegment(atMost: 0.5, excluding: skipped) }), compact(sparse) {
                continue
            }
            if !sealed {
                // Dead records in segments still being filled can only go once those are
                // sealed: before evicting anything, seal them (new ones are started as needed).
                sealed = true
                let idle = segments.sealIdle()
                if !idle.isEmpty {
                    index.withLock { index in for (id, size) in idle { index.recordSegment(id, size: size, sealed: true) } }
                    continue
                }
            }
            let evicted = index.withLock { index -> [DiskIndex.Entry] in
                index.evict(downTo: index.totalBytes - excess)
            }
            if evicted.isEmpty {
                // Nothing left to evict: only open segments' dead records remain.
                break
            }
            evictedCount += evicted.count
            dispose(evicted)
        }
        if evictedCount > 0 { evictions.add(evictedCount) }
    }

    /// What eviction brings a tier past `maxBytes` back down to: 90 % of it. A tier at or above
    /// it is full (``isFull``).
    static func evictionTarget(_ maxBytes: Int64) -> Int64 { maxBytes - maxBytes / 10 }

    /// Deletes sealed segments that hold no live record; returns whether there were any.
    @discardableResult
    func reclaimEmptySegments() -> Bool {
        let empty = index.withLock { index in
            let ids = index.emptySegments()
            for id in ids { index.dropSegment(id) }
            return ids
        }
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        for id in empty { segments.remove(id, entries: entries) }
        return !empty.isEmpty
    }

    /// Copies the live records of segment `id` to an open segment and deletes it (writer
    /// thread). A record removed or replaced while it is copied keeps its new state (the index
    /// moves an entry only if it still points at the old copy). Returns whether the segment
    /// went; on a read or write error it stays, and is not picked again (its records leave as
    /// they are evicted, and the empty segment then goes).
    func compact(_ id: UInt32) -> Bool {
        guard let file = segments.file(id) else {
            index.withLock { $0.dropSegment(id) }
            return true
        }
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        var moved = 0
        do {
            var reader = try SegmentReader(file: file)
            while let record = try reader.next() {
                guard !record.freed, let head = record.head else { continue }
                let name = DiskCache.entryName(key: CacheKey(normalized: head.key), vary: head.vary)
                let live = index.withLock { index in
                    index.entry(named: name).map { $0.segment == id && $0.offset == record.offset } ?? false
                }
                guard live else { continue }
                // The copy is freed again if the entry changed while it was written.
                let (unused, _) = try appendToSegment(head: try reader.bytes(of: record), body: []) {
                    index, segment, offset -> (segment: UInt32, offset: Int64)? in
                    index.move(name, from: id, at: record.offset, to: segment, at: offset) ? nil : (segment, offset)
                }
                if let unused { segments.markFreed(unused.segment, at: unused.offset) } else { moved += 1 }
            }
        } catch {
            logger.error(
                "cannot compact disk cache segment", metadata: ["segment": "\(id)", "error": "\(error)", "directory": "\(directory)"])
            if let error = error as? SystemError { writeFailed(error) }
            uncompactable.withLock { _ = $0.insert(id) }
            return false
        }
        // Records that failed to parse were never indexed; anything still pointing here was
        // removed or replaced meanwhile, so the segment holds nothing live now.
        let empty = index.withLock { index in
            guard index.segments[id]?.live ?? 0 == 0 else { return false }
            index.dropSegment(id)
            return true
        }
        if empty { segments.remove(id, entries: entries) }
        logger.debug("compacted disk cache segment", metadata: ["segment": "\(id)", "moved": "\(moved)"])
        return empty
    }
}

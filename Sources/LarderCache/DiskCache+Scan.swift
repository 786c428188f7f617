import Glibc
import LarderHTTP
import LarderIO
import Logging

/// The start-up scan, on its own thread: the index rebuilt from the segments and entry files.
extension DiskCache {
    // MARK: Start-up scan (scanner thread)

    /// Indexes every entry by its head: first the records of the segments that existed at
    /// start (newest segment first), then the entry files under `v1/ab/cd/`. Drops what fails
    /// its checks.
    func scan() {
        let start = Clocks.monotonicNanos()
        var found = 0
        var dropped = 0
        var ignored = 0
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        for id in startSegments.reversed() {
            let (segmentFound, segmentDropped) = scanSegment(id, entries: entries)
            found += segmentFound
            dropped += segmentDropped
        }
        var batch: [DiskIndex.Entry] = []
        let root = directory + "/v1"
        // Never into a symbolic link (list(at:) does not follow one): a directory elsewhere
        // linked into the tree is neither read nor has files removed.
        for first in (try? FileSystem.list(at: entries)) ?? [] where first != DiskSegments.directoryName {
            for second in (try? FileSystem.list(at: entries, first)) ?? [] {
                for file in (try? FileSystem.list(at: entries, first + "/" + second)) ?? [] {
                    // Larder names entry files by their key's hash, in `ab/cd/` of its first
                    // digits; anything else there is not an entry it wrote: left alone.
                    guard let name = EntryName(fileName: file), relativePath(forName: name) == "\(first)/\(second)/\(file)"
                    else {
                        if ignored == 0 {
                            logger.notice(
                                "ignoring a file in the disk cache that is not an entry",
                                metadata: ["file": "\(root)/\(first)/\(second)/\(file)"])
                        }
                        ignored += 1
                        continue
                    }
                    do {
                        let loaded = try loadHead(name: name)
                        batch.append(
                            DiskIndex.Entry(
                                key: CacheKey(normalized: loaded.head.key), vary: loaded.head.vary, name: name,
                                size: loaded.recordLength, responseTime: loaded.head.responseTime,
                                bodyTime: loaded.head.bodyArrival))
                        found += 1
                    } catch {
                        if discard(name, after: error) { dropped += 1 }
                    }
                    if batch.count >= 512 {
                        indexScannedFiles(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
        }
        indexScannedFiles(batch)
        let overCap = index.withLock { $0.endScan() }
        if !overCap.isEmpty {
            logger.notice(
                "removed disk cache variants over the cap of a URL",
                metadata: ["entries": "\(overCap.count)", "cap": "\(DiskIndex.maxVariants)"])
        }
        // Queued before the scan is declared complete, so that waiting for completion and then
        // draining the writer (tests, `drain()`) sees the eviction done.
        writer.submit { [self] in
            if !overCap.isEmpty { dispose(overCap) }
            reclaimEmptySegments()
            evictIfNeeded()
        }
        scanComplete.store(true, ordering: .releasing)
        let millis = (Clocks.monotonicNanos() - start) / 1_000_000
        logger.info(
            "disk cache index rebuilt",
            metadata: [
                "entries": "\(found)", "dropped": "\(dropped)", "ignored": "\(ignored)", "ms": "\(millis)",
                "directory": "\(directory)",
            ])
    }

    /// Indexes entry files the scan read. A file whose name the index holds as a segment
    /// record is an older version (a crash came between the record's append and the file's
    /// deletion): it goes.
    func indexScannedFiles(_ batch: [DiskIndex.Entry]) {
        let stale = index.withLock { index in
            batch.filter { entry in !index.insertIfAbsent(entry) && (index.entry(named: entry.name)?.segment ?? 0) != 0 }
        }
        if !stale.isEmpty { writer.submit { [self] in dispose(stale) } }
    }

    /// Indexes the records of one segment; returns how many were found and dropped. A
    /// damaged record (a crash cut it short, or its preamble is unreadable) ends the segment:
    /// the file is cut there. Records are indexed newest first, so that of two records for one
    /// name (a crash came between a replacement's append and the old record's mark) the later
    /// wins; the earlier, and any removed while the scan ran, are marked freed.
    func scanSegment(_ id: UInt32, entries: Int32) -> (found: Int, dropped: Int) {
        let path = "\(directory)/v1/\(DiskSegments.relativePath(id))"
        let file: OpenFile
        var reader: SegmentReader
        do {
            file = try segments.open(id, entries: entries)
        } catch  where FileSystem.isForeign(error) {
            // Not a segment of the cache's own (a link, a FIFO, a hard link to a file
            // elsewhere): its name goes, never what it names.
            try? FileSystem.remove(at: entries, DiskSegments.relativePath(id))
            logger.warning(
                "removed a name in the disk cache that is not its own segment", metadata: ["file": "\(path)", "error": "\(error)"])
            return (0, 0)
        } catch {
            logger.error("cannot read disk cache segment", metadata: ["file": "\(path)", "error": "\(error)"])
            return (0, 0)
        }
        do {
            reader = try SegmentReader(file: file)
        } catch {
            logger.error("cannot read disk cache segment", metadata: ["file": "\(path)", "error": "\(error)"])
            return (0, 0)
        }
        var records: [DiskIndex.Entry] = []
        var unreadable: [Int64] = []
        var end: Int64 = 0
        do {
            while let record = try reader.next() {
                end = record.offset + record.length
                if record.freed { continue }
                guard let head = record.head else {
                    unreadable.append(record.offset)
                    continue
                }
                let key = CacheKey(normalized: head.key)
                records.append(
                    DiskIndex.Entry(
                        key: key, vary: head.vary, name: DiskCache.entryName(key: key, vary: head.vary),
                        size: record.length, responseTime: head.responseTime, bodyTime: head.bodyArrival, segment: id,
                        offset: record.offset))
            }
        } catch {
            if case .unknownVersion(let version)? = (error as? SegmentReader.Damaged)?.problem,
                version < DiskEntryFormat.readableVersions.lowerBound
            {
                logger.notice(
                    "dropping disk cache records of an older format", metadata: ["file": "\(path)", "version": "\(version)"])
            } else {
                corruptions.add(1)
                logger.warning(
                    "cutting off the damaged end of a disk cache segment",
                    metadata: ["file": "\(path)", "offset": "\(end)", "reason": "\(error)"])
            }
            do {
                try FileSystem.truncate(file.fd, to: end)
            } catch {
                logger.error("cannot cut a disk cache segment", metadata: ["file": "\(path)", "error": "\(error)"])
            }
        }
        for offset in unreadable {
            corruptions.add(1)
            logger.warning(
                "dropping corrupt disk cache entry", metadata: ["file": "\(path) at \(offset)", "reason": "unreadable head"])
            segments.markFreed(id, at: offset)
        }
        var losers: [Int64] = []
        var remaining = records[...]
        while !remaining.isEmpty {
            let chunk = remaining.suffix(512)
            remaining = remaining.dropLast(chunk.count)
            index.withLock { index in
                for record in chunk.reversed() where !index.insertIfAbsent(record) { losers.append(record.offset) }
            }
        }
        // Sealed only now: until its records are in, the writer must not take the segment for
        // empty (and delete it) or compact it.
        index.withLock { $0.recordSegment(id, size: end, sealed: true) }
        for offset in losers { segments.markFreed(id, at: offset) }
        let dropped = unreadable.count + (end < reader.size ? 1 : 0)
        return (records.count - losers.count, dropped)
    }
}

import Glibc
import LarderIO
import Synchronization

/// One response being written to the disk tier. The body goes to a temporary file as it
/// streams; ``finish()`` fills in the length and checksum and renames the file into place, so an
/// entry is visible only when complete. All file work happens on the cache's writer thread, in
/// the order the calls were made; the calling event loop never blocks.
///
/// State: `state` is touched only by writer-thread jobs (the mutex makes that checkable);
/// `durableBytes` is published for readers that follow the file while it grows.
public final class DiskWrite: Sendable {
    let cache: DiskCache
    let key: CacheKey
    let name: EntryName
    let vary: [String: String]
    private let maxBytes: Int64
    /// The temporary file while the body streams.
    public let temporaryPath: String
    /// Where the body starts in the file.
    public let bodyOffset: Int64
    /// The head section's checksum, for the final preamble.
    private let headChecksum: UInt64
    /// Body bytes written to the file so far.
    public let durableBytes = Atomic<Int>(0)
    private let failed = Atomic<Bool>(false)

    private struct State {
        var fd: Int32 = -1
        var written: Int64 = 0
        var checksum = BodyChecksum()
        var blocks = BlockChecksums()
        var done = false
    }

    private let state = Locked(State())

    init(cache: DiskCache, key: CacheKey, name: EntryName, head: DiskEntryFormat.Head, maxBytes: Int64) {
        self.cache = cache
        self.key = key
        self.name = name
        vary = head.vary
        self.maxBytes = maxBytes
        temporaryPath = cache.temporaryPath(name, suffix: "tmp")
        // Lengths zero until `finish` rewrites the preamble in place; a body streamed now is
        // checksummed in the current format, whatever head it came with.
        var head = head
        head.version = DiskEntryFormat.version
        let entryHead = DiskEntryFormat.entryHead(head, bodyLength: 0, bodyChecksum: 0)
        bodyOffset = Int64(entryHead.count)
        headChecksum = DiskEntryFormat.headChecksum(of: entryHead[DiskEntryFormat.preambleLength...])
        cache.writer.submit { [self] in
            run { state throws(SystemError) in
                state.fd = try FileSystem.createExclusive(temporaryPath)
                try FileSystem.writeAll(state.fd, entryHead)
            }
        }
    }

    /// A read-only descriptor on the file being written, for clients that have fallen behind
    /// the body still held in memory: they read what is durable (``durableBytes``) from it.
    /// Opened before any such bytes are dropped from memory, so a later unlink (failure) or
    /// rename (completion) does not take the data away.
    public func openForReading() -> OpenFile? {
        guard !hasFailed else { return nil }
        if let file = try? OpenFile.open(temporaryPath) { return file }
        // Already renamed into place.
        return try? OpenFile.open(cache.path(forName: name))
    }

    /// Whether a write error (or the size limit) ended this write.
    public var hasFailed: Bool { failed.load(ordering: .acquiring) }

    /// Appends body bytes.
    public func append(_ chunk: [UInt8]) {
        cache.writer.submit { [self] in
            run { state throws(SystemError) in
                guard state.written + Int64(chunk.count) <= maxBytes else {
                    throw SystemError(call: "write (larger than disk.max_object_bytes)", errno: EFBIG)
                }
                try FileSystem.writeAll(state.fd, chunk)
                state.checksum.update(chunk)
                state.blocks.update(chunk)
                state.written += Int64(chunk.count)
                durableBytes.store(Int(state.written), ordering: .releasing)
            }
        }
    }

    /// Completes the entry: writes the block table, length and checksum, checks the file size, renames it into
    /// place and indexes it. `completion` (on the writer thread) says whether it was stored.
    public func finish(expectedLength: Int, completion: (@Sendable (Bool) -> Void)? = nil) {
        cache.writer.submit { [self] in
            let stored = run { state throws(SystemError) in
                guard state.written == Int64(expectedLength) else {
                    throw SystemError(call: "finish (body length mismatch)", errno: EIO)
                }
                let preamble = DiskEntryFormat.preamble(
                    bodyLength: state.written, bodyChecksum: state.checksum.value, headChecksum: headChecksum,
                    headLength: Int(bodyOffset) - DiskEntryFormat.preambleLength)
                // The block table after the body, then the preamble that says where it starts.
                let table = state.blocks.table
                if !table.isEmpty { try FileSystem.writeAll(state.fd, table) }
                try FileSystem.writeAll(state.fd, preamble, at: 0)
                let size = try FileSystem.size(of: state.fd)
                guard size == bodyOffset + state.written + Int64(table.count) else {
                    throw SystemError(call: "fstat (size mismatch)", errno: EIO)
                }
                Syscall.close(state.fd)
                state.fd = -1
                try FileSystem.renameCreatingDirectory(temporaryPath, cache.path(forName: name))
                state.done = true
                cache.didStore(key: key, name: name, vary: vary, size: size)
            }
            completion?(stored)
        }
    }

    /// Abandons the entry (the response failed or was cut short): the temporary file goes away.
    public func abort() {
        cache.writer.submit { [self] in
            state.withLock { state in
                if state.fd >= 0 { Syscall.close(state.fd) }
                state.fd = -1
                state.done = true
            }
            failed.store(true, ordering: .releasing)
            try? FileSystem.remove(temporaryPath)
        }
    }

    /// Runs one step on the writer thread; the first error abandons the entry and is reported
    /// to the cache (which degrades to memory-only storing for a while).
    @discardableResult
    private func run(_ step: (inout State) throws(SystemError) -> Void) -> Bool {
        state.withLock { state in
            guard !state.done, !failed.load(ordering: .relaxed) else { return false }
            do throws(SystemError) {
                try step(&state)
                return true
            } catch {
                if state.fd >= 0 { Syscall.close(state.fd) }
                state.fd = -1
                state.done = true
                failed.store(true, ordering: .releasing)
                try? FileSystem.remove(temporaryPath)
                if error.errno == EFBIG && error.call.hasPrefix("write (") {
                    return false  // over the size limit: not a disk fault
                }
                cache.writeFailed(error)
                return false
            }
        }
    }
}

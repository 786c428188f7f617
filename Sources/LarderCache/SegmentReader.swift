import LarderIO

/// Reads the records of a segment file in order through a 1 MiB buffer: the start-up scan and
/// compaction walk whole segments this way (one `pread` per megabyte, not one per record).
/// A value owned by the one thread walking the segment.
struct SegmentReader {
    /// One record: where it is, and its head when it is live and readable.
    struct Record {
        let offset: Int64
        /// Preamble, head and body.
        let length: Int64
        /// Marked removed (``DiskEntryFormat/freedMagic``).
        let freed: Bool
        /// Nil for a freed record, or one whose lengths are sound but whose head does not parse.
        let head: DiskEntryFormat.Head?
    }

    /// The bytes at `offset` are not a whole record: a preamble that does not parse, or a
    /// record running past the end of the file (cut short by a crash). Nothing after `offset`
    /// can be found: the records' own lengths are the only way to the next one.
    struct Damaged: Error, CustomStringConvertible {
        let offset: Int64
        let problem: DiskEntryFormat.Problem
        var description: String { "damaged record at \(offset): \(problem)" }
    }

    let file: OpenFile
    let size: Int64
    /// Where the next record starts.
    private(set) var offset: Int64 = 0
    private var buffer: [UInt8] = []
    private var bufferStart: Int64 = 0
    private static let chunk = 1 << 20

    init(file: OpenFile) throws(SystemError) {
        self.file = file
        size = try FileSystem.size(of: file.fd)
    }

    /// The next record, nil at the end of the file.
    mutating func next() throws -> Record? {
        guard offset < size else { return nil }
        let start = offset
        let preambleBytes = try bytes(at: start, count: DiskEntryFormat.preambleLength)
        guard preambleBytes.count == DiskEntryFormat.preambleLength else {
            throw Damaged(offset: start, problem: .truncated(expected: Int64(DiskEntryFormat.preambleLength), actual: size - start))
        }
        let preamble: DiskEntryFormat.Preamble
        do {
            preamble = try DiskEntryFormat.decodePreamble(preambleBytes, acceptingFreed: true)
        } catch {
            throw Damaged(offset: start, problem: error)
        }
        let length = preamble.recordLength
        guard length <= size - start else {
            throw Damaged(offset: start, problem: .truncated(expected: length, actual: size - start))
        }
        offset = start + length
        if preamble.freed { return Record(offset: start, length: length, freed: true, head: nil) }
        let headBytes = try bytes(at: start + Int64(DiskEntryFormat.preambleLength), count: preamble.headLength)
        let head = try? DiskEntryFormat.decodeHead(headBytes, preamble: preamble)
        return Record(offset: start, length: length, freed: false, head: head)
    }

    /// The whole of `record` (preamble, head and body), from the buffer when it is there.
    mutating func bytes(of record: Record) throws -> [UInt8] {
        let bytes = try bytes(at: record.offset, count: Int(record.length))
        guard bytes.count == Int(record.length) else {
            throw Damaged(offset: record.offset, problem: .truncated(expected: record.length, actual: Int64(bytes.count)))
        }
        return Array(bytes)
    }

    /// `count` bytes at `position` (fewer at the end of the file), from the buffer, refilled
    /// from `position` when they are not all in it.
    private mutating func bytes(at position: Int64, count: Int) throws(SystemError) -> ArraySlice<UInt8> {
        let end = position + Int64(count)
        if position < bufferStart || end > bufferStart + Int64(buffer.count) {
            buffer = try FileSystem.read(file.fd, at: position, count: max(count, SegmentReader.chunk))
            bufferStart = position
        }
        let from = Int(position - bufferStart)
        return buffer[from..<min(buffer.count, from + count)]
    }
}

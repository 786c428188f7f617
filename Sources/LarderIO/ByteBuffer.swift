/// A growable byte buffer with read and write positions, for bytes read from a socket and not
/// yet consumed. Owned by one connection on one loop thread.
public final class ByteBuffer {
    private var storage: UnsafeMutableRawPointer
    public private(set) var capacity: Int
    private var readerIndex = 0
    private var writerIndex = 0
    private let initialCapacity: Int

    public init(capacity: Int = 4096) {
        initialCapacity = capacity
        self.capacity = capacity
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// The unread bytes. Valid until the next mutating call.
    @inline(__always)
    public var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage + readerIndex, count: writerIndex - readerIndex)
    }

    @inline(__always)
    public var readableCount: Int { writerIndex - readerIndex }

    @inline(__always)
    public var isEmpty: Bool { writerIndex == readerIndex }

    /// Marks `count` bytes as consumed.
    @inline(__always)
    public func consume(_ count: Int) {
        readerIndex += count
        if readerIndex == writerIndex {
            readerIndex = 0
            writerIndex = 0
        }
    }

    /// Space to read into: at least `minimum` bytes unless that would pass `limit` total.
    public func writableSpace(minimum: Int, limit: Int) -> UnsafeMutableRawBufferPointer {
        if capacity - writerIndex < minimum && readerIndex > 0 {
            let count = writerIndex - readerIndex
            storage.copyMemory(from: storage + readerIndex, byteCount: count)
            readerIndex = 0
            writerIndex = count
        }
        if capacity - writerIndex < minimum && capacity < limit {
            let newCapacity = min(max(capacity * 2, writerIndex + minimum), max(limit, capacity))
            let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
            grown.copyMemory(from: storage + readerIndex, byteCount: writerIndex - readerIndex)
            writerIndex -= readerIndex
            readerIndex = 0
            storage.deallocate()
            storage = grown
            capacity = newCapacity
        }
        return UnsafeMutableRawBufferPointer(start: storage + writerIndex, count: capacity - writerIndex)
    }

    /// Records that `count` bytes were written into the space from ``writableSpace(minimum:limit:)``.
    @inline(__always)
    public func didWrite(_ count: Int) {
        writerIndex += count
    }

    /// Returns to the initial capacity when empty, so idle connections hold little memory.
    public func shrinkIfEmpty() {
        guard isEmpty, capacity > initialCapacity else { return }
        storage.deallocate()
        storage = .allocate(byteCount: initialCapacity, alignment: 16)
        capacity = initialCapacity
        readerIndex = 0
        writerIndex = 0
    }
}

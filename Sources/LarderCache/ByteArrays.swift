/// Byte arrays written in place, for the heads a miss stores (the memory tier's and the disk
/// entry's).
enum ByteArrays {
    /// Largest scratch kept on the stack: up to here `withUnsafeTemporaryAllocation` needs no
    /// check of the thread's stack.
    static let scratchLimit = 1024

    /// An array of the bytes `write` puts at the start of a buffer of `capacity` bytes
    /// (returning how many). Up to ``scratchLimit`` they are written on the stack and copied
    /// into an array of their size: `Array(unsafeUninitializedCapacity:)` is not specialized
    /// for bytes outside the standard library, and looks up the array's type on every call,
    /// which costs more than the copy.
    @inline(__always)
    static func make(capacity: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Int) -> [UInt8] {
        if capacity <= scratchLimit {
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { scratch in
                let count = write(scratch)
                // Copied as raw bytes: UnsafeBufferPointer<UInt8>'s copy is also the one every
                // `append(contentsOf:)` of a buffer inlines, and a second use here outlined it.
                return Array(UnsafeRawBufferPointer(start: scratch.baseAddress, count: count))
            }
        }
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in count = write(buffer) }
    }
}

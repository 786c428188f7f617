import LarderCache
import LarderUpstream

/// A request body held in memory, sent upstream from there (for `dedup = "always"`, where the
/// body is read in full to compute the coalescing key).
///
/// State: loop-confined, owned by the fill that sends it.
final class BufferedBody: RequestBodySource {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Starts over (a retried request sends the body again).
    func rewind() { offset = 0 }

    func readRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk {
        guard offset < bytes.count else { return .end }
        let count = min(buffer.count, bytes.count - offset)
        bytes.withUnsafeBytes { raw in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + count)]))
        }
        offset += count
        return .bytes(count)
    }

    /// A 64-bit hash of a body, for the coalescing key: format 4's multiply chains, not format
    /// 5's CRC, whose collisions are made by solving linear equations.
    static func hash(_ bytes: [UInt8]) -> UInt64 {
        var checksum = BodyChecksum(entryVersion: 4)
        checksum.update(bytes)
        return checksum.value
    }
}

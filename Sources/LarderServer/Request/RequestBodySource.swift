import LarderUpstream

/// Supplies a request body to an upstream transfer.
protocol RequestBodySource: AnyObject {
    func readRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk
}

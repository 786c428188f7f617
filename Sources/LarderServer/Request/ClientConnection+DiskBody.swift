import LarderCache
import LarderHTTP
import LarderIO

/// Sending a body over one block from the disk tier: block by block, each read and checked on
/// the reader thread before its bytes are queued, never the file's bytes themselves
/// (``DiskBodyStream``). A block that fails its check ends the response incomplete: the
/// connection closes without finishing the framing (RFC 9112 §8), and never sends a byte
/// that was not checked.
extension ClientConnection {
    /// Starts sending body bytes `first..<first + count` of `stored` (a file-backed body); the
    /// framing is already set. The exchange's state says what follows the last byte: the
    /// finish, or a sliced answer's next slice.
    func startDiskBody(_ stored: StoredResponse, first: Int, count: Int, exchange: Exchange) {
        exchange.take(.diskBodyStarted(DiskBodyStream(stored: stored, first: first, count: count)))
        pumpDiskBody(exchange)
    }

    /// Asks the reader thread for the next block when the output has room for it.
    func pumpDiskBody(_ exchange: Exchange) {
        guard var stream = exchange.diskBody, let block = stream.blockToRead(pendingOutput: pendingOutputBytes) else { return }
        let token = proxy.park(self)
        stream.reading = token
        exchange.updateDiskBody(stream)
        let handle = proxy.loop.handle
        proxy.cache.readBlock(of: stream.stored, block: block) { read in
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.unpark(token)?.receiveDiskBlock(read, block: block, token: token)
            }
        }
    }

    /// A block is read: queues its checked bytes and asks for the next, or ends the response.
    private func receiveDiskBlock(_ read: DiskCache.BlockRead, block: Int, token: Int) {
        guard isExchanging, let exchange, var stream = exchange.diskBody, stream.reading == token else { return }
        stream.reading = nil
        guard case .checked(let bytes) = read else {
            abandonDiskBody(exchange)
            return
        }
        let part = stream.take(block: block, count: bytes.count)
        exchange.updateDiskBody(stream)
        sendBodyPart(bytes, from: part.offset, count: part.count, exchange: exchange)
        proxy.telemetry.stats[.bytesFromCache].add(part.count)
        if stream.isDone {
            switch exchange.take(.diskBodyEnded) {
            case .finish: finishExchange()
            case .walkSlices: pumpSlices(exchange)
            default: break
            }
        } else {
            pumpDiskBody(exchange)
        }
        flushSoon()
    }

    /// The body cannot go on (a damaged block, dropped and counted by the cache): the head is
    /// out, so the connection closes with the body incomplete, the only honest signal left.
    private func abandonDiskBody(_ exchange: Exchange) {
        proxy.logger.warning(
            "a disk cache entry failed its check while being sent; the response ends incomplete",
            metadata: ["url": "\(proxy.loggable(exchange.key?.url ?? "-"))"])
        exchange.slices = nil
        exchange.failure = .disk
        endIncomplete(exchange)
        flushSoon()
    }
}

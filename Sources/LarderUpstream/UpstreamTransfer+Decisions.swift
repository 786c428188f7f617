import LarderHTTP
import LarderIO

/// What a transfer decides on its own while curl runs it: whether it may use a connection,
/// and what the origin's head says. No curl call here (UpstreamClient.swift has them all).
extension UpstreamTransfer {
    /// The destination check for a direct transfer (a parent's address is the operator's
    /// choice); a refusal is remembered for the error. An address curl did not say is refused.
    func mayConnect(to address: SocketAddress?) -> Bool {
        guard let check = destinationCheck else { return true }
        guard let address else { return false }
        guard let reason = check.refusal(for: address) else { return true }
        refusal = "\(address): \(reason)"
        return false
    }

    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Int {
        do {
            switch try headParser.feed(line) {
            case .none:
                break
            case .interim(let interim) where interim.status == 101:
                // Larder never asks for an upgrade (Upgrade is hop-by-hop and not forwarded), and
                // a server must not switch to a protocol the request did not name (RFC 9110
                // §15.2.2). libcurl would take the 101 for the final answer and deliver what
                // follows as its body, with no head for Larder's readers.
                protocolError = "the origin switched protocols (101) though the request asked for no upgrade"
                return 0
            case .interim(let interim):
                delegate?.upstreamDidReceiveInterim(interim)
            case .final(let parsed):
                receivedHead = true
                declaredLength = parsed.declaredLength
                deadline.receivedHead(now: client.loopNow)
                delegate?.upstreamDidReceiveHead(parsed)
            }
        } catch {
            // The head's size and framing are checked before any of it goes on: curl would
            // deliver a chunked body, or its own idea of the length, while the head says another.
            protocolError = "the origin's response head is invalid: \(error.reason)"
            return 0
        }
        return line.count
    }
}

import Dispatch
import Glibc
import LarderConfig
import LarderIO
import Synchronization
import Testing

@testable import LarderServer

/// CONNECT targets: a name pinned in `upstream.resolve` for that port is answered at once from
/// the entry, without a lookup; anything else goes to a resolver thread.
@Suite(.timeLimit(.minutes(1))) struct TunnellingTests {
    @Test(arguments: [
        // (host asked, port asked, answered on the caller's thread with the pinned address)
        ("mirror.example", 443, true),
        ("MIRROR.example", 443, true),
        ("127.0.0.1", 443, true),
        ("127.0.0.1", 8443, false),
        ("127.0.0.2", 443, false),
    ])
    func pinnedNamesAreAnsweredAtOnceAndTheRestOnAResolverThread(host: String, port: Int, pinned: Bool) throws {
        let entries = try ["mirror.example:443:127.0.0.9", "127.0.0.1:443:127.0.0.9"].map { try ResolveEntry.parse($0).get() }
        let pinnedAddresses = entries[0].addresses
        let tunnelling = Tunnelling()
        defer { tunnelling.stop() }
        let answer = Mutex<Result<[SocketAddress], Resolver.Failure>?>(nil)
        let onCaller = Mutex(false)
        let done = DispatchSemaphore(value: 0)
        let caller = pthread_self()
        tunnelling.resolve(host, port: UInt16(port), pinned: entries) { result in
            answer.withLock { $0 = result }
            onCaller.withLock { $0 = pthread_equal(pthread_self(), caller) != 0 }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        // A pinned name needs no lookup; anything else is looked up on a resolver thread.
        #expect(onCaller.withLock { $0 } == pinned)
        let addresses = try #require(answer.withLock { $0 }).get()
        if pinned {
            #expect(addresses == pinnedAddresses)
        } else {
            #expect(addresses == [try #require(SocketAddress(parsing: "\(host):\(port)"))])
        }
    }
}

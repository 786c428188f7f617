import CLarderSystem
import Glibc
import Synchronization

/// Anonymous memory files (memfd_create(2)) for large bodies held by the memory tier: the
/// kernel can `sendfile` from one by reference, where a `sendmsg` from a Swift array copies
/// every byte into the socket, on every hit. Each costs a descriptor, so the process keeps
/// no more than ``anonymousLimit`` of them; past that, bodies stay in arrays.
extension OpenFile {
    /// Anonymous files open now.
    private static let anonymousOpen = Atomic<Int>(0)
    private static let anonymousMaximum = Atomic<Int>(256)

    /// The most anonymous files open at once (set at start-up from the descriptor limit).
    public static var anonymousLimit: Int {
        get { anonymousMaximum.load(ordering: .relaxed) }
        set { anonymousMaximum.store(max(0, newValue), ordering: .relaxed) }
    }

    /// Anonymous files open now (for tests and statistics).
    public static var anonymousCount: Int { anonymousOpen.load(ordering: .relaxed) }

    /// A new in-memory file holding a copy of `bytes`, or nil when ``anonymousLimit`` files
    /// are open already or the kernel refuses one (the caller keeps the array instead).
    public static func anonymous(copying bytes: [UInt8]) -> OpenFile? {
        // Count first, so concurrent callers cannot overshoot the limit between check and add.
        let opened = anonymousOpen.add(1, ordering: .relaxed).newValue
        guard opened <= anonymousMaximum.load(ordering: .relaxed) else {
            anonymousOpen.subtract(1, ordering: .relaxed)
            return nil
        }
        guard let fd = try? Syscall.call("memfd_create", { larder_memfd_create("larder-body") }) else {
            anonymousOpen.subtract(1, ordering: .relaxed)
            return nil
        }
        // From here the file owns the count: its deinit gives it back.
        let file = OpenFile(anonymous: fd)
        guard (try? FileSystem.writeAll(fd, bytes)) != nil else { return nil }
        return file
    }

    static func releaseAnonymous() {
        anonymousOpen.subtract(1, ordering: .relaxed)
    }
}

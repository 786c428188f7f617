import CLarderSystem
import Glibc

/// Anonymous memory files (memfd_create(2)) for large bodies held by the memory tier: the
/// kernel can `sendfile` from one by reference, where a `sendmsg` from a Swift array copies
/// every byte into the socket, on every hit. Each costs a descriptor, counted in a
/// ``MemoryFileBudget``.
extension OpenFile {
    /// A new in-memory file holding a copy of `bytes`, or nil when `budget` is used up or the
    /// kernel refuses one (the caller keeps the array instead).
    public static func anonymous(copying bytes: [UInt8], budget: MemoryFileBudget = .shared) -> OpenFile? {
        guard budget.take() else { return nil }
        guard let fd = try? Syscall.call("memfd_create", { larder_memfd_create("larder-body") }) else {
            budget.giveBack()
            return nil
        }
        // From here the file holds the place: its deinit gives it back.
        let file = OpenFile(fd: fd, budget: budget)
        guard (try? FileSystem.writeAll(fd, bytes)) != nil else { return nil }
        budget.countMade()
        return file
    }
}

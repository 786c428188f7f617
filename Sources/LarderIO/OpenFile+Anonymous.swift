import CLarderSystem
import Glibc

/// Anonymous memory files (memfd_create(2)) for large bodies held by the memory tier: the
/// kernel can `sendfile` from one by reference, where a `sendmsg` from a Swift array copies
/// every byte into the socket, on every hit. Each costs a descriptor, counted in a
/// ``MemoryFileBudget``.
extension OpenFile {
    /// A new in-memory file holding a copy of `bytes`, or nil when `budget` is used up or the
    /// kernel refuses one (the caller keeps the array instead). The file is sealed (no change
    /// of size or bytes, ever) and, while `budget` has mappings left, mapped read-only
    /// (``mapped``); a file that could not be is still whole, only read with `pread` by the
    /// transports that cannot `sendfile`.
    public static func anonymous(copying bytes: [UInt8], budget: MemoryFileBudget = .shared) -> OpenFile? {
        guard budget.take() else { return nil }
        guard let fd = try? Syscall.call("memfd_create", { larder_memfd_create("larder-body") }) else {
            budget.giveBack()
            return nil
        }
        guard (try? FileSystem.writeAll(fd, bytes)) != nil else {
            Syscall.close(fd)
            budget.giveBack()
            return nil
        }
        budget.countMade()
        // Sealed, the file can never be shorter than the mapping: no read of it can fault.
        guard !bytes.isEmpty, (try? Syscall.call("fcntl", { larder_seal_memfd(fd) })) != nil, budget.takeMapping() else {
            return OpenFile(fd: fd, budget: budget)
        }
        guard let address = try? Syscall.call("mmap", { larder_map_shared_readonly(fd, bytes.count) }) else {
            budget.giveBackMapping()
            return OpenFile(fd: fd, budget: budget)
        }
        return OpenFile(fd: fd, budget: budget, mappedAddress: address, mappedCount: bytes.count)
    }
}

import LarderIO
import Synchronization

/// Entry files kept open after a disk hit, by name, so that later hits on the event loops
/// neither open them nor wait for a cold inode: `open` of a file whose inode or directories
/// are not in memory is a disk read, which would hold up every client of the loop. A lookup on
/// a loop uses only a descriptor found here; an entry file not here is opened on the reader
/// thread, which then keeps it (``DiskCache/lookup(_:request:)``).
///
/// A descriptor stays valid when its name is renamed over or unlinked, and then holds the old
/// file: whoever replaces or removes an entry file forgets its name, and a lookup that finds a
/// file no longer linked (`st_nlink` 0: replaced, removed, also by hand) forgets it and goes
/// to the reader thread, which opens what the name holds now. At most ``capacity`` are kept,
/// the least recently used closed first (a client still sending one keeps its own reference).
final class OpenEntryFiles: Sendable {
    private struct Kept {
        let file: OpenFile
        var used: UInt64
    }

    private struct State {
        var files: [EntryName: Kept] = [:]
        var clock: UInt64 = 0
        var capacity: Int
    }

    private let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(capacity: max(0, capacity)))
    }

    /// How many descriptors may be kept; lowering it closes the least recently used.
    var capacity: Int {
        get { state.withLock { $0.capacity } }
        set {
            let dropped = state.withLock { state -> [OpenFile] in
                state.capacity = max(0, newValue)
                return Self.trim(&state)
            }
            _ = dropped  // closed here, outside the lock, as the last references go
        }
    }

    var count: Int { state.withLock { $0.files.count } }

    /// The file kept for `name`, marked used; nil when none is.
    func file(named name: EntryName) -> OpenFile? {
        state.withLock { state in
            // One probe: the use is marked in place, through the index.
            guard let index = state.files.index(forKey: name) else { return nil }
            state.clock += 1
            state.files.values[index].used = state.clock
            return state.files.values[index].file
        }
    }

    /// Keeps `file` for `name` (replacing any other), closing the least recently used past
    /// ``capacity``.
    func keep(_ file: OpenFile, named name: EntryName) {
        let dropped = state.withLock { state -> [OpenFile] in
            guard state.capacity > 0 else { return [] }
            state.clock += 1
            let previous = state.files.updateValue(Kept(file: file, used: state.clock), forKey: name)
            return Self.trim(&state) + (previous.map { [$0.file] } ?? [])
        }
        _ = dropped
    }

    /// Stops keeping `name`'s file, if any (it was replaced or removed).
    func forget(_ name: EntryName) {
        let dropped = state.withLock { $0.files.removeValue(forKey: name) }
        _ = dropped
    }

    /// Stops keeping the files that have no name left (`st_nlink` 0: removed or renamed over,
    /// also by hand, and not asked for since), which would otherwise hold their disk space
    /// until they were. Off the loops: an `fstat` per kept file, outside the lock. Returns how
    /// many it let go.
    @discardableResult
    func forgetUnlinked() -> Int {
        let kept = state.withLock { $0.files.map { ($0.key, $0.value.file) } }
        var unlinked: [(EntryName, OpenFile)] = []
        for (name, file) in kept where (try? FileSystem.status(of: file.fd).links) ?? 0 == 0 {
            unlinked.append((name, file))
        }
        guard !unlinked.isEmpty else { return 0 }
        let dropped = state.withLock { state -> [OpenFile] in
            // Only if the name still holds that very file, not one kept for it since.
            unlinked.compactMap { name, file in
                guard state.files[name]?.file === file else { return nil }
                return state.files.removeValue(forKey: name)?.file
            }
        }
        return dropped.count
    }

    /// Stops keeping every file (the whole cache was removed).
    func forgetAll() {
        let dropped = state.withLock { state -> [EntryName: Kept] in
            defer { state.files = [:] }
            return state.files
        }
        _ = dropped
    }

    /// Removes the least recently used files once past the capacity, an eighth of it at once
    /// (a sort, so one in an eighth of the keeps pays for it, on the reader thread), and
    /// returns them, to be released once the lock is let go.
    private static func trim(_ state: inout State) -> [OpenFile] {
        guard state.files.count > state.capacity else { return [] }
        let excess = state.files.count - state.capacity + state.capacity / 8
        let oldest = state.files.sorted { $0.value.used < $1.value.used }.prefix(excess)
        return oldest.compactMap { state.files.removeValue(forKey: $0.key)?.file }
    }
}

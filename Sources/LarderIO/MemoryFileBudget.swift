import Synchronization

/// How many anonymous memory files (``OpenFile/anonymous(copying:budget:)``) may be open at
/// once, how many are, and how many were made, and the body sizes worth one. Each holds a
/// descriptor, so the process keeps their number under a limit set at start-up from the
/// descriptor limit; past it, callers keep their bytes in arrays.
///
/// State: atomics. A file takes its place before it is created and gives it back from its
/// deinit, so concurrent takers cannot overshoot the limit between check and add.
public final class MemoryFileBudget: Sendable {
    /// The process's budget: what the memory tier uses and the statistics report.
    public static let shared = MemoryFileBudget(limit: 256)

    private let open = Atomic<Int>(0)
    private let maximum: Atomic<Int>
    private let made = Atomic<Int>(0)
    private let largestBody: Atomic<Int>
    private let mappings = Atomic<Int>(0)

    /// The most memory files mapped at once (``OpenFile/mapped``) unless told: each mapping is
    /// one of the process's `vm.max_map_count` areas (65,530 by default), which the allocator
    /// and thread stacks need too; files past it are read with `pread` by transports that copy.
    public static let defaultMappingLimit = 4096
    /// The most memory files mapped at once.
    public let mappingLimit: Int

    /// The smallest body worth a memory file: below it, one `sendmsg` of head and body costs
    /// less than the copy `sendfile` would save.
    public static let smallestFileBody = 32 * 1024

    /// The body sizes worth a memory file where the kernel's indirect calls are retpolines, or
    /// nobody knows whether they are: past 1 MiB, `sendfile`'s per-page work costs more than
    /// copying the array (``IndirectCalls``).
    public static let sizesWithRetpolines = smallestFileBody..<(1024 * 1024)

    /// The body sizes worth a memory file on a kernel whose indirect calls are (`true`), are not
    /// (`false`) or may be (`nil`) retpolines: from ``smallestFileBody`` on, up to 1 MiB unless
    /// they are known not to be.
    public static func fileSizes(retpolines: Bool?) -> Range<Int> {
        retpolines == false ? smallestFileBody..<Int.max : sizesWithRetpolines
    }

    public init(
        limit: Int, fileSizes: Range<Int> = MemoryFileBudget.sizesWithRetpolines, mappingLimit: Int = MemoryFileBudget.defaultMappingLimit
    ) {
        maximum = Atomic(max(0, limit))
        largestBody = Atomic(fileSizes.upperBound)
        self.mappingLimit = max(0, mappingLimit)
    }

    /// The body sizes kept in memory files: from ``smallestFileBody``, up to a bound set at
    /// start-up (``fileSizes(retpolines:)``); the lower bound of a new value is ignored.
    public var fileSizes: Range<Int> {
        get { MemoryFileBudget.smallestFileBody..<max(MemoryFileBudget.smallestFileBody, largestBody.load(ordering: .relaxed)) }
        set { largestBody.store(newValue.upperBound, ordering: .relaxed) }
    }

    /// The most files open at once.
    public var limit: Int {
        get { maximum.load(ordering: .relaxed) }
        set { maximum.store(max(0, newValue), ordering: .relaxed) }
    }

    /// Files open now.
    public var count: Int { open.load(ordering: .relaxed) }

    /// Files made so far (each filled once: a count of the copies into memory files), for tests.
    package var filesMade: Int { made.load(ordering: .relaxed) }

    func countMade() {
        made.add(1, ordering: .relaxed)
    }

    /// Takes a place; false (taking nothing) when the limit is reached.
    func take() -> Bool {
        guard open.add(1, ordering: .relaxed).newValue <= maximum.load(ordering: .relaxed) else {
            giveBack()
            return false
        }
        return true
    }

    func giveBack() {
        open.subtract(1, ordering: .relaxed)
    }

    /// Memory files mapped now.
    package var mappedCount: Int { mappings.load(ordering: .relaxed) }

    /// Takes one of the ``mappingLimit`` mappings; false (taking nothing) when none is left.
    func takeMapping() -> Bool {
        guard mappings.add(1, ordering: .relaxed).newValue <= mappingLimit else {
            giveBackMapping()
            return false
        }
        return true
    }

    func giveBackMapping() {
        mappings.subtract(1, ordering: .relaxed)
    }
}

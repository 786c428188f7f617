import Synchronization

/// An integer shared between threads, in a class so it can live in arrays. Relaxed ordering:
/// counters are independent and only read for reporting.
public final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)

    public init() {}

    @inline(__always) public func add(_ amount: Int) { value.add(amount, ordering: .relaxed) }
    @inline(__always) public func subtract(_ amount: Int) { value.subtract(amount, ordering: .relaxed) }
    @inline(__always) public func load() -> Int { value.load(ordering: .relaxed) }
    @inline(__always) public func store(_ newValue: Int) { value.store(newValue, ordering: .relaxed) }
}

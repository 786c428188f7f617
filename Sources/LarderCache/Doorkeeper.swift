/// TinyLFU's doorkeeper (Einziger, Friedman, Manes, "TinyLFU: A Highly Efficient Cache
/// Admission Policy", ACM ToS 2017, §3.4.2): the keys that recently missed, so that a response
/// is stored on its key's second miss within a window and a one-off download does not evict
/// entries that are reused. Two generations of key hashes: a key is remembered while it is in
/// either, and when the current one holds `window` keys it becomes the previous one, so a key
/// is forgotten after one to two windows of other first misses.
///
/// The window follows the cache: a twentieth of the entries it holds when a generation turns
/// over, at least ``minimumWindow`` keys. Benchmarks/trace.sh's trace chose the fraction
/// (docs/PERFORMANCE.md, "Hit ratio at a fixed budget"). A hash collision only admits early.
public struct Doorkeeper: Sendable {
    /// The smallest window, in keys: a nearly empty cache still remembers a few misses.
    public static let minimumWindow = 1000
    /// The window is the cache's entry count divided by this.
    public static let entriesPerWindowKey = 20

    private var current: Set<Int> = []
    private var previous: Set<Int> = []
    /// Keys the current generation takes before it turns over.
    public private(set) var window = Doorkeeper.minimumWindow

    public init() {}

    /// Whether the key with `hash` missed within the window (its response is stored now);
    /// otherwise it is remembered and false returned. `entriesHeld` is the cache's entry count,
    /// read only when a generation turns over.
    public mutating func admit(_ hash: Int, entriesHeld: () -> Int) -> Bool {
        if current.contains(hash) || previous.contains(hash) { return true }
        current.insert(hash)
        if current.count >= window {
            swap(&current, &previous)
            current.removeAll(keepingCapacity: true)
            window = max(Self.minimumWindow, entriesHeld() / Self.entriesPerWindowKey)
        }
        return false
    }

    /// Keys remembered now (both generations).
    public var count: Int { current.count + previous.count }
}

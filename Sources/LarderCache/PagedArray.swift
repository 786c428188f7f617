/// An append-only growable array stored in fixed pages of 4,096 elements.
///
/// Why: a Swift `Array` grows by copying every element to a buffer twice the size; the disk
/// index's slot array (about 100 bytes an entry) then copied tens of megabytes inside its lock.
/// Pages never move; growing adds one page.
struct PagedArray<Element> {
    private static var pageShift: Int { 12 }
    private static var pageMask: Int { (1 << pageShift) - 1 }
    private var pages: [[Element]] = []
    private(set) var count = 0

    subscript(index: Int) -> Element {
        get { pages[index >> Self.pageShift][index & Self.pageMask] }
        _modify { yield &pages[index >> Self.pageShift][index & Self.pageMask] }
    }

    /// Consumed: a disk index entry handed over is moved into its page, not copied.
    mutating func append(_ element: consuming Element) {
        if count & Self.pageMask == 0 {
            var page: [Element] = []
            page.reserveCapacity(1 << Self.pageShift)
            pages.append(page)
        }
        pages[pages.count - 1].append(element)
        count += 1
    }
}

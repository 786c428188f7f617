/// Items of many clients taken in turn: one of each client's, oldest first, then the next
/// client's (round robin), so a client with many queued waits behind each other client's one
/// item, not the other way round. Each client holds `perClient` at most, all of them `total`
/// at most; when the whole queue is full, a client holding two more than the newcomer gives up
/// its newest (``Admission/queuedPushingOut(_:)``), so a client with few waiting always gets in
/// while some other holds many.
///
/// A value: the caller keeps it behind a lock (``ProxyAuthenticator``'s loops add, its thread
/// takes).
struct FairQueue<Client: Hashable, Item> {
    let perClient: Int
    let total: Int
    private var queues: [Client: [Item]] = [:]
    /// The clients with items, in the order they are served.
    private var turns: [Client] = []
    private(set) var count = 0

    init(perClient: Int, total: Int) {
        precondition(perClient > 0 && total >= perClient)
        self.perClient = perClient
        self.total = total
    }

    enum Admission {
        case queued
        /// Queued; the item given back was another client's newest, taken out for it.
        case queuedPushingOut(Item)
        /// Not queued: its client holds `perClient`, or every client as few as it would.
        case refused
    }

    /// Queues `item` for `client`.
    mutating func add(_ item: Item, for client: Client) -> Admission {
        let own = queues[client]?.count ?? 0
        guard own < perClient else { return .refused }
        var pushedOut: Item?
        if count >= total {
            guard let busiest = queues.max(by: { $0.value.count < $1.value.count }), busiest.value.count > own + 1 else {
                return .refused
            }
            // It keeps at least two: still queued, still in `turns`.
            pushedOut = queues[busiest.key]?.removeLast()
            count -= 1
        }
        if own == 0 { turns.append(client) }
        queues[client, default: []].append(item)
        count += 1
        return pushedOut.map { .queuedPushingOut($0) } ?? .queued
    }

    /// The next item: the oldest of the client whose turn it is.
    mutating func take() -> Item? {
        guard !turns.isEmpty else { return nil }
        let client = turns.removeFirst()
        guard var items = queues.removeValue(forKey: client), !items.isEmpty else { return nil }
        let item = items.removeFirst()
        count -= 1
        if !items.isEmpty {
            queues[client] = items
            turns.append(client)
        }
        return item
    }

    /// How many `client` has queued.
    func queued(for client: Client) -> Int { queues[client]?.count ?? 0 }
}

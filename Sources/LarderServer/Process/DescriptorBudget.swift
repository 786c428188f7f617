/// How the open-file limit divides up at start: Larder's standing descriptors (listeners,
/// event loops, logs, the disk tier's segment files and the entry files it keeps open, the
/// memory tier's files), then one per
/// client connection up to `proxy.max_connections`, and what is left for the upstream sockets
/// and tunnels those connections open. Only a limit that cannot hold the clients themselves is
/// short: a connection past it would be refused by the kernel rather than by Larder's 503.
struct DescriptorBudget: Sendable, Equatable {
    /// The soft limit in force (after raising it to the hard one).
    let limit: Int
    let maxConnections: Int
    /// Descriptors held whatever the traffic.
    let standing: Int

    /// Listeners, epoll and wake-up descriptors, logs, the DNS and admin threads' files: a
    /// generous round number, as the loops are few.
    static let fixed = 64

    /// The budget for `limit` with `segments` disk segment files, `memoryFiles` memory-tier
    /// files and `entryFiles` disk entry files kept open at most.
    init(limit: Int, maxConnections: Int, segments: Int, memoryFiles: Int, entryFiles: Int = 0) {
        self.limit = limit
        self.maxConnections = maxConnections
        standing = Self.fixed + segments + memoryFiles + entryFiles
    }

    /// Whether the limit cannot hold `max_connections` clients beside the standing descriptors.
    var isShort: Bool { limit < standing + maxConnections }

    /// The client connections the limit holds.
    var clients: Int { max(0, min(maxConnections, limit - standing)) }

    /// With every client connected, how many may have an upstream socket or tunnel open too.
    var upstreams: Int { max(0, min(maxConnections, limit - standing - maxConnections)) }
}

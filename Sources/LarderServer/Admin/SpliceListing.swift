import LarderIO

/// What `GET /tls` answers: the clients tunnelled blind ("spliced") to intercepted hosts, until
/// when and why, and the hosts whose clients failed handshakes. `larder tls` reads it back.
public struct SpliceListing: Codable, Sendable, Equatable {
    /// One client spliced for one host.
    public struct Splice: Codable, Sendable, Equatable {
        public var host: String
        /// The client's address: the splice applies to connections from it only.
        public var client: String
        /// When the splice runs out, in Unix seconds, and how many seconds that is from now.
        public var until: Int
        public var secondsLeft: Int
        /// Certificate refusals counted for this client and host.
        public var failures: Int
        /// The last refusal: its outcome and reason (the client's alert).
        public var reason: String
    }

    /// A host whose clients failed handshakes (any cause).
    public struct FailingHost: Codable, Sendable, Equatable {
        public var host: String
        public var failures: Int
        /// Of those, refusals of the certificate: only these count towards a splice.
        public var refusals: Int
        public var lastFailure: String
        public var secondsAgo: Int
        /// How many clients are spliced for it now.
        public var splicedClients: Int
    }

    /// `tls.splice_after_failures` and `tls.splice_for` (seconds), as configured.
    public var spliceAfterFailures: Int
    public var spliceForSeconds: Int
    public var splices: [Splice]
    public var failingHosts: [FailingHost]

    public func json() throws -> [UInt8] { try SnakeCaseJSON.encode(self) }

    public static func decode(_ bytes: [UInt8]) throws -> SpliceListing { try SnakeCaseJSON.decode(SpliceListing.self, from: bytes) }
}

extension SpliceListing {
    /// The listing of `hosts` at monotonic `now`, wall time `wall` (Unix seconds).
    init(_ hosts: InterceptedHosts, threshold: Int, spliceFor: Duration, now: UInt64, wall: Double) {
        func seconds(_ nanoseconds: UInt64) -> Int { Int(nanoseconds / 1_000_000_000) }
        self.init(
            spliceAfterFailures: threshold, spliceForSeconds: Int(spliceFor.components.seconds),
            splices: hosts.splices(now: now).map { pair, entry, until in
                let left = until - now
                return Splice(
                    host: pair.host, client: pair.client, until: Int(wall) + seconds(left + 999_999_999),
                    secondsLeft: seconds(left + 999_999_999),
                    failures: entry.failures, reason: entry.lastFailure)
            },
            failingHosts: hosts.failing(100, now: now).map { host, failures, spliced in
                FailingHost(
                    host: host, failures: failures.count, refusals: failures.refusals, lastFailure: failures.last,
                    secondsAgo: seconds(now &- failures.lastAt), splicedClients: spliced)
            })
    }
}

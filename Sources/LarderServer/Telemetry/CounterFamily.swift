import LarderUpstream

/// Every counter ``Statistics`` keeps by a label, declared once beside ``Counter``: the
/// family's `/metrics` series (name, label, help), its label values, and its `/stats` field.
/// ``MetricsTable`` makes one row per value and ``StatsDocument/init(counters:)`` writes the
/// field from ``Statistics/values(_:)``; adding a family is a case here, its counters in
/// ``Statistics`` and its field in ``StatsDocument``.
public enum CounterFamily: Int, CaseIterable, Sendable {
    /// Requests answered, by ``RequestOutcome``.
    case requests
    /// Proxied responses by status class.
    case responses
    /// Upstream attempts retried, by ``RetryPolicy/Reason``.
    case upstreamRetries
    /// Upstream exchanges that failed for good, by the error kind or the status class.
    case upstreamFailures
    /// Pooled upstream connections closed while idle, by ``IdleConnectionClose``.
    case idleUpstreamClosed
    /// Server handshakes with intercepted clients, by ``Statistics/HandshakeOutcome``.
    case tlsHandshakes
    /// Requests answered inside intercepted sessions, by proxied ``RequestOutcome``.
    case tlsRequests

    /// A family's `/metrics` series (all counters) and `/stats` field.
    struct Declaration {
        let name: String
        let label: String
        let help: String
        /// The label's values, in the order ``Statistics/values(_:)`` returns their counts.
        let values: [String]
        let field: Field
    }

    /// Where `/stats` shows a family; one added after the first release is optional, so
    /// `larder stats` still reads an older daemon's document.
    enum Field {
        case value(WritableKeyPath<StatsDocument, [String: Int]>)
        case optional(WritableKeyPath<StatsDocument, [String: Int]?>)
    }

    var declaration: Declaration {
        switch self {
        case .requests:
            .init(
                name: "larder_requests_total", label: "outcome", help: "Requests answered, by how they were answered.",
                values: RequestOutcome.allCases.map(\.rawValue), field: .value(\.requests))
        case .responses:
            .init(
                name: "larder_responses_total", label: "class", help: "Proxied responses, by status class (admin requests not counted).",
                values: Statistics.statusClassNames, field: .optional(\.responses))
        case .upstreamRetries:
            .init(
                name: "larder_upstream_retries_total", label: "reason", help: "Upstream attempts retried, by reason.",
                values: RetryPolicy.Reason.allCases.map(\.rawValue), field: .value(\.upstream.retries))
        case .upstreamFailures:
            .init(
                name: "larder_upstream_failures_total", label: "reason", help: "Upstream exchanges that failed for good, by reason.",
                values: Statistics.failureReasons, field: .value(\.upstream.failures))
        case .idleUpstreamClosed:
            .init(
                name: "larder_upstream_idle_closed_total", label: "reason",
                help:
                    "Pooled upstream connections closed unused because bytes arrived (data) or the origin closed them (closed) while idle.",
                values: IdleConnectionClose.allCases.map(\.rawValue), field: .optional(\.upstream.idleConnectionsClosed))
        case .tlsHandshakes:
            .init(
                name: "larder_tls_handshakes_total", label: "outcome", help: "TLS handshakes with intercepted clients, by outcome.",
                values: Statistics.HandshakeOutcome.allCases.map(\.rawValue), field: .value(\.tls.handshakes))
        case .tlsRequests:
            .init(
                name: "larder_tls_requests_total", label: "outcome", help: "Requests answered inside intercepted TLS sessions, by outcome.",
                values: RequestOutcome.proxied.map(\.rawValue), field: .value(\.tls.requests))
        }
    }

    /// The count under `value` as `document` shows it (0 where the field or the value is missing).
    func read(_ document: StatsDocument, _ value: String) -> Int {
        switch declaration.field {
        case .value(let path): document[keyPath: path][value] ?? 0
        case .optional(let path): document[keyPath: path]?[value] ?? 0
        }
    }

    /// Sets the family's field of `document` to `counts`, given in ``Declaration/values`` order.
    func write(_ counts: [Int], into document: inout StatsDocument) {
        let declared = declaration
        let table = Dictionary(uniqueKeysWithValues: zip(declared.values, counts))
        switch declared.field {
        case .value(let path): document[keyPath: path] = table
        case .optional(let path): document[keyPath: path] = table
        }
    }
}

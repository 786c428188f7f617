import LarderHTTP

/// Requests on the admin listener: health and counters.
extension ClientConnection {
    func answerAdmin(_ exchange: Exchange) {
        exchange.outcome = .admin
        guard case .origin(let target) = exchange.head.target else {
            respondGenerated(status: 400, message: "the admin listener takes origin-form requests (GET /stats)", outcome: .admin)
            return
        }
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        switch (exchange.head.method, path) {
        case (.get, "/healthz"), (.head, "/healthz"):
            respondGenerated(status: 200, message: "ok", outcome: .admin)
        default:
            respondGenerated(status: 404, message: "no admin endpoint \(path)", outcome: .admin)
        }
    }
}

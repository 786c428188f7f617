import LarderHTTP
import LarderIO

/// `GET /tls` and `DELETE /tls/splices?host=H[&client=ADDR]` on the admin listener: which
/// clients are tunnelled blind to which intercepted hosts, and ending those splices (a
/// mutating call: the same bearer-token rule as `POST /purge`).
extension ClientConnection {
    func answerTLSAdmin(_ exchange: Exchange, path: String, query: String, authorized: (Exchange) -> Bool) {
        let method = exchange.head.method
        switch path {
        case "/tls":
            guard method == .get || method == .head else {
                return respondAdmin(405, text: "method not allowed here", extra: [("Allow", "GET, HEAD")])
            }
            let tls = exchange.runtime.config.tls
            let listing = SpliceListing(
                proxy.shared.interceptedHosts, threshold: tls.spliceAfterFailures, spliceFor: tls.spliceFor, now: Clocks.monotonicNanos(),
                wall: Clocks.wallSeconds())
            guard let json = try? listing.json() else { return respondAdmin(500, text: "the TLS listing could not be encoded") }
            respondAdmin(200, contentType: "application/json", body: json)
        default:
            guard method == .delete else { return respondAdmin(405, text: "method not allowed here", extra: [("Allow", "DELETE")]) }
            guard authorized(exchange) else { return }
            guard let host = QueryString.value("host", in: query), !host.isEmpty else {
                return respondAdmin(400, text: "DELETE /tls/splices?host=HOST[&client=ADDRESS] names the host whose splices end")
            }
            // `client=` with nothing after it (`--client "$ADDRESS"` with the variable unset) is
            // refused: taken as no client, it would end every client's splice of the host.
            let named = QueryString.value("client", in: query)
            if named?.isEmpty == true {
                return respondAdmin(400, text: "client= names no address; leave it out to end every client's splice of the host")
            }
            // An address in any spelling (`::FFFF:127.0.0.2`, `0:0::1`) names the client as the
            // table does: the canonical form, IPv4 for an IPv4-mapped address.
            let client = named.map { SocketAddress(literal: $0, port: 0)?.unmapped.ipString ?? $0 }
            let cleared = proxy.shared.interceptedHosts.clear(host: host.lowercased(), client: client)
            proxy.logger.notice(
                "tls: splices cleared through the admin endpoint",
                metadata: ["host": "\(host.lowercased())", "client": "\(client ?? "*")", "cleared": "\(cleared)"])
            let clientJSON = client.map(JSON.string) ?? "null"
            respondAdmin(
                200, contentType: "application/json",
                body: Array("{\"host\":\(JSON.string(host.lowercased())),\"client\":\(clientJSON),\"cleared\":\(cleared)}\n".utf8))
        }
    }
}

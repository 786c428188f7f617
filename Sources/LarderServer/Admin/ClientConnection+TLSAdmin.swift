import LarderHTTP
import LarderIO

/// `GET /tls` and `DELETE /tls/splices?host=H[&client=ADDR]` on the admin listener: which
/// clients are tunnelled blind to which intercepted hosts, and ending those splices (a
/// mutating call: ``AdminRouter`` checks the bearer token as for `POST /purge`).
extension ClientConnection {
    func answerTLSListing(_ exchange: Exchange) {
        let tls = exchange.runtime.config.tls
        let listing = SpliceListing(
            proxy.tunnelling.interceptedHosts, threshold: tls.spliceAfterFailures, spliceFor: tls.spliceFor, now: Clocks.monotonicNanos(),
            wall: Clocks.wallSeconds())
        guard let json = try? listing.json() else { return respondAdmin(500, text: "the TLS listing could not be encoded") }
        respondAdmin(.json(json))
    }

    /// Ends the splices of `host` (lower-case), of one client or of all.
    func answerEndSplices(host: String, client: String?) {
        let cleared = proxy.tunnelling.interceptedHosts.clear(host: host, client: client)
        proxy.logger.notice(
            "tls: splices cleared through the admin endpoint",
            metadata: ["host": "\(host)", "client": "\(client ?? "*")", "cleared": "\(cleared)"])
        let clientJSON = client.map(JSON.string) ?? "null"
        respondAdmin(.json(Array("{\"host\":\(JSON.string(host)),\"client\":\(clientJSON),\"cleared\":\(cleared)}\n".utf8)))
    }
}

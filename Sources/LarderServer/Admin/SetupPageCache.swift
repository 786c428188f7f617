/// The onboarding page and PAC file as rendered, by the proxy address they advertise, for one
/// configuration generation. Rendering the page costs tens of cache hits (every tool's setup
/// text), and anyone the proxy admits may ask for it as often as they like; its bytes change
/// only with the address the client reached and the configuration (`proxy.setup_host`, the CA,
/// `tls.intercept`), which a reload replaces along with its generation.
///
/// State: loop-confined, one per ``ProxyLoop``.
struct SetupPageCache {
    /// A server has few local addresses; a host with many (IPv6 privacy addresses, say) still
    /// keeps at most this many documents per loop.
    static let capacity = 16

    private struct Key: Hashable {
        let document: SetupPage.Document
        let proxyAddress: String
    }

    /// The generation the bodies were rendered under; -1 before the first.
    private(set) var generation = -1
    private var bodies: [Key: [UInt8]] = [:]

    var count: Int { bodies.count }

    /// `document` for `proxyAddress` under configuration `generation`: the bytes rendered
    /// before under the same generation, or `render`'s. A newer generation drops the rest;
    /// an older one (a request that started before a reload) is rendered and not kept.
    mutating func body(
        _ document: SetupPage.Document, proxyAddress: String, generation: Int, render: () -> [UInt8]
    ) -> [UInt8] {
        if generation > self.generation {
            bodies.removeAll()
            self.generation = generation
        } else if generation < self.generation {
            return render()
        }
        let key = Key(document: document, proxyAddress: proxyAddress)
        if let body = bodies[key] { return body }
        let body = render()
        if bodies.count >= Self.capacity { bodies.remove(at: bodies.startIndex) }
        bodies[key] = body
        return body
    }

    /// Drops every body (a reload: the next request renders under the new configuration).
    mutating func removeAll() {
        bodies.removeAll()
    }
}

import LarderHTTP
import LarderIO

/// The admin API's routing, as a pure function: from a request's method, path, query and
/// `Authorization` (with the configured token) to what answers it. It reads no socket and no
/// shared state: an endpoint that needs them comes back as an ``Endpoint`` for the connection
/// to carry out; everything the request alone decides (404, 405 with `Allow`, 401, a 400 for a
/// malformed query) comes back as a ``Response``. The checks that come before any endpoint,
/// `Host` and the request's site, are ``AdminRequestGuard``'s.
enum AdminRouter {
    /// A response the admin listener sends: always `Cache-Control: no-store`.
    struct Response: Sendable, Equatable {
        var status: Int
        var contentType: String
        var body: [UInt8]
        /// Further fields (`Allow`, `WWW-Authenticate`, a PAC's or certificate's own).
        var fields: [Field] = []

        struct Field: Sendable, Equatable {
            var name: String
            var value: String
        }

        /// A one-line text body.
        static func text(_ status: Int, _ message: String, fields: [Field] = []) -> Response {
            Response(status: status, contentType: "text/plain; charset=utf-8", body: Array((message + "\n").utf8), fields: fields)
        }

        /// A JSON document.
        static func json(_ body: [UInt8]) -> Response {
            Response(status: 200, contentType: "application/json", body: body)
        }
    }

    /// An endpoint that needs the proxy's state, with its query already checked.
    enum Endpoint: Sendable, Equatable {
        case dashboard
        case health
        case stats
        case metrics
        case pac
        /// `POST /purge?url=`.
        case purgeURL(AbsoluteURL)
        /// `POST /purge?key=`: a key as a route built it.
        case purgeKey(String)
        /// `GET /cache?prefix=&limit=`; the prefix as given (the listing cuts it before any
        /// value `log.redact_query` hides).
        case listCache(prefix: String, limit: Int)
        case ban(BanPattern)
        /// `DELETE /cache`.
        case clearCache
        case tlsListing
        /// `DELETE /tls/splices?host=[&client=]`: the host lower-cased, the client in the
        /// table's canonical form.
        case endSplices(host: String, client: String?)
    }

    /// What answers a request.
    enum Decision: Sendable, Equatable {
        /// Answered from the request alone.
        case respond(Response)
        /// 401: a mutating call without the right bearer token (the connection logs it).
        case unauthorized(Response)
        case endpoint(Endpoint)
    }

    /// Listing limit when the query names none, and the most one call lists.
    static let defaultListLimit = 100
    static let maxListLimit = 10_000

    /// Routes a request. `token`: `admin.token`, empty when mutating calls need none;
    /// `authorization`: the request's `Authorization` field.
    static func route(method: HTTPMethod, path: String, query: String, authorization: String?, token: String) -> Decision {
        let readOnly = method == .get || method == .head
        let authorized = token.isEmpty || ConstantTime.equal(authorization ?? "", "Bearer " + token)
        let unauthorized = Decision.unauthorized(
            .text(
                401, "this call needs Authorization: Bearer <admin.token>",
                fields: [.init(name: "WWW-Authenticate", value: "Bearer realm=\"larder\"")]))
        switch path {
        case "/", "/index.html":
            return readOnly ? .endpoint(.dashboard) : methodNotAllowed("GET, HEAD")
        case "/healthz":
            return readOnly ? .endpoint(.health) : methodNotAllowed("GET, HEAD")
        case "/stats":
            return readOnly ? .endpoint(.stats) : methodNotAllowed("GET, HEAD")
        case "/metrics":
            return readOnly ? .endpoint(.metrics) : methodNotAllowed("GET, HEAD")
        case "/proxy.pac":
            return readOnly ? .endpoint(.pac) : methodNotAllowed("GET, HEAD")
        case "/purge":
            guard method == .post || method == .purge else { return methodNotAllowed("POST") }
            guard authorized else { return unauthorized }
            if let key = QueryString.value("key", in: query), !key.isEmpty { return .endpoint(.purgeKey(key)) }
            guard let text = QueryString.value("url", in: query), let url = try? AbsoluteURL(parsing: text) else {
                return .respond(
                    .text(400, "POST /purge?url=http://host/path or ?key=debian:/path (URL-encoded) names the URL or key to purge"))
            }
            return .endpoint(.purgeURL(url))
        case "/cache" where readOnly:
            // URLs can carry credentials (signed query strings): listed only with the token.
            guard authorized else { return unauthorized }
            var limit = defaultListLimit
            if let text = QueryString.value("limit", in: query) {
                guard let number = Int(text), number >= 1, number <= maxListLimit else {
                    return .respond(.text(400, "limit must be a number from 1 to \(maxListLimit)"))
                }
                limit = number
            }
            return .endpoint(.listCache(prefix: QueryString.value("prefix", in: query) ?? "", limit: limit))
        case "/cache":
            guard method == .delete else { return methodNotAllowed("GET, HEAD, DELETE") }
            guard authorized else { return unauthorized }
            return .endpoint(.clearCache)
        case "/ban":
            guard method == .post else { return methodNotAllowed("POST") }
            guard authorized else { return unauthorized }
            return ban(query: query)
        case "/tls":
            return readOnly ? .endpoint(.tlsListing) : methodNotAllowed("GET, HEAD")
        case "/tls/splices":
            guard method == .delete else { return methodNotAllowed("DELETE") }
            guard authorized else { return unauthorized }
            return endSplices(query: query)
        default:
            return .respond(
                .text(
                    404,
                    "no admin endpoint \(path); try /, /healthz, /stats, /metrics, /proxy.pac, GET /cache?prefix=, POST /purge?url=, "
                        + "POST /ban?prefix= or ?glob=, DELETE /cache"))
        }
    }

    private static func methodNotAllowed(_ allowed: String) -> Decision {
        .respond(.text(405, "method not allowed here", fields: [.init(name: "Allow", value: allowed)]))
    }

    /// `POST /ban?prefix=…` or `?glob=…`: one of the two, not empty, and a glob that is not
    /// all stars (that is `DELETE /cache`).
    private static func ban(query: String) -> Decision {
        switch (QueryString.value("prefix", in: query), QueryString.value("glob", in: query)) {
        case (let prefix?, nil) where !prefix.isEmpty:
            return .endpoint(.ban(.prefix(prefix)))
        case (nil, let glob?) where !glob.isEmpty:
            guard glob.contains(where: { $0 != "*" }) else {
                return .respond(.text(400, "a glob of stars alone matches every entry; DELETE /cache clears the cache"))
            }
            return .endpoint(.ban(.glob(glob)))
        default:
            return .respond(
                .text(400, "POST /ban?prefix=https://host/path/ or /ban?glob=https://host/*.whl (one of the two, URL-encoded, not empty)"))
        }
    }

    private static func endSplices(query: String) -> Decision {
        guard let host = QueryString.value("host", in: query), !host.isEmpty else {
            return .respond(.text(400, "DELETE /tls/splices?host=HOST[&client=ADDRESS] names the host whose splices end"))
        }
        // `client=` with nothing after it (`--client "$ADDRESS"` with the variable unset) is
        // refused: taken as no client, it would end every client's splice of the host.
        let named = QueryString.value("client", in: query)
        if named?.isEmpty == true {
            return .respond(.text(400, "client= names no address; leave it out to end every client's splice of the host"))
        }
        // An address in any spelling (`::FFFF:127.0.0.2`, `0:0::1`) names the client as the
        // table does: the canonical form, IPv4 for an IPv4-mapped address.
        let client = named.map { SocketAddress(literal: $0, port: 0)?.unmapped.ipString ?? $0 }
        return .endpoint(.endSplices(host: host.lowercased(), client: client))
    }
}

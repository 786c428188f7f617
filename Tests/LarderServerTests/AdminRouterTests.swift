import LarderHTTP
import Testing

@testable import LarderServer

/// The admin API's routing, in process: every path, method and token check without a socket.
@Suite struct AdminRouterTests {
    private func route(
        _ method: HTTPMethod, _ target: String, authorization: String? = nil, token: String = ""
    ) -> AdminRouter.Decision {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return AdminRouter.route(
            method: method, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : "", authorization: authorization,
            token: token)
    }

    private func status(_ decision: AdminRouter.Decision) -> Int? {
        switch decision {
        case .respond(let response), .unauthorized(let response): response.status
        case .endpoint: nil
        }
    }

    private func allow(_ decision: AdminRouter.Decision) -> String? {
        guard case .respond(let response) = decision else { return nil }
        return response.fields.first { $0.name == "Allow" }?.value
    }

    @Test func readOnlyEndpointsAnswerGetAndHead() {
        let table: [(String, AdminRouter.Endpoint)] = [
            ("/", .dashboard), ("/index.html", .dashboard), ("/healthz", .health), ("/stats", .stats), ("/metrics", .metrics),
            ("/proxy.pac", .pac), ("/tls", .tlsListing),
        ]
        for (path, endpoint) in table {
            #expect(route(.get, path) == .endpoint(endpoint), "\(path)")
            #expect(route(.head, path) == .endpoint(endpoint), "\(path)")
            let refused = route(.post, path)
            #expect(status(refused) == 405 && allow(refused) == "GET, HEAD", "\(path)")
        }
    }

    @Test func anUnknownPathIs404() {
        let decision = route(.get, "/nothing-here")
        #expect(status(decision) == 404)
        guard case .respond(let response) = decision else { return }
        #expect(String(decoding: response.body, as: UTF8.self).hasPrefix("no admin endpoint /nothing-here; try /, /healthz"))
    }

    @Test func mutatingEndpointsNameTheirMethods() {
        #expect(allow(route(.get, "/purge?url=http://a/")) == "POST")
        #expect(allow(route(.get, "/ban?prefix=x")) == "POST")
        #expect(allow(route(.post, "/cache")) == "GET, HEAD, DELETE")
        #expect(allow(route(.get, "/tls/splices?host=a")) == "DELETE")
        #expect(allow(route(.put, "/purge")) == "POST")
    }

    @Test func theTokenGuardsMutatingCallsAndTheListing() throws {
        let token = "s3cret"
        let calls: [(HTTPMethod, String)] = [
            (.post, "/purge?url=http%3A%2F%2Fa%2Fb"), (.purge, "/purge?key=debian:/x"), (.get, "/cache?prefix=http://a/"),
            (.delete, "/cache"), (.post, "/ban?prefix=http://a/"), (.delete, "/tls/splices?host=a"),
        ]
        for (method, target) in calls {
            for wrong in [nil, "Bearer nope", "Bearer s3cret ", "bearer s3cret", "s3cret"] {
                let decision = route(method, target, authorization: wrong, token: token)
                guard case .unauthorized(let response) = decision else {
                    Issue.record("\(method.rawValue) \(target) with \(wrong ?? "no Authorization"): \(decision)")
                    continue
                }
                #expect(response.status == 401)
                #expect(response.fields == [.init(name: "WWW-Authenticate", value: "Bearer realm=\"larder\"")])
            }
            guard case .endpoint = route(method, target, authorization: "Bearer s3cret", token: token) else {
                Issue.record("\(method.rawValue) \(target) with the token")
                continue
            }
            // No token configured: the call needs none.
            guard case .endpoint = route(method, target) else {
                Issue.record("\(method.rawValue) \(target) without a token configured")
                continue
            }
        }
        // The method is checked before the token: a wrong method is 405 even without one.
        #expect(status(route(.get, "/purge", token: token)) == 405)
        // Read-only endpoints need no token.
        #expect(route(.get, "/stats", token: token) == .endpoint(.stats))
    }

    @Test func queriesAreCheckedBeforeTheEndpointRuns() throws {
        let url = try AbsoluteURL(parsing: "http://a/b")
        #expect(route(.post, "/purge?url=http%3A%2F%2Fa%2Fb") == .endpoint(.purgeURL(url)))
        #expect(route(.purge, "/purge?key=debian%3A%2Fx") == .endpoint(.purgeKey("debian:/x")))
        #expect(status(route(.post, "/purge")) == 400)
        #expect(status(route(.post, "/purge?url=not-a-url")) == 400)
        #expect(route(.get, "/cache") == .endpoint(.listCache(prefix: "", limit: 100)))
        #expect(route(.get, "/cache?prefix=http://a/&limit=7") == .endpoint(.listCache(prefix: "http://a/", limit: 7)))
        for limit in ["0", "10001", "x", ""] { #expect(status(route(.get, "/cache?limit=\(limit)")) == 400, "\(limit)") }
        #expect(route(.post, "/ban?prefix=http://a/") == .endpoint(.ban(.prefix("http://a/"))))
        #expect(route(.post, "/ban?glob=http://a/*.whl") == .endpoint(.ban(.glob("http://a/*.whl"))))
        #expect(status(route(.post, "/ban?glob=**")) == 400)
        #expect(status(route(.post, "/ban")) == 400)
        #expect(status(route(.post, "/ban?prefix=a&glob=b")) == 400)
        #expect(route(.delete, "/cache") == .endpoint(.clearCache))
    }

    @Test func spliceEndsNameAHostAndACanonicalClient() {
        #expect(route(.delete, "/tls/splices?host=Example.COM") == .endpoint(.endSplices(host: "example.com", client: nil)))
        #expect(
            route(.delete, "/tls/splices?host=a&client=%3A%3AFFFF%3A127.0.0.2") == .endpoint(.endSplices(host: "a", client: "127.0.0.2")))
        #expect(status(route(.delete, "/tls/splices")) == 400)
        #expect(status(route(.delete, "/tls/splices?host=a&client=")) == 400)
    }
}

import LarderConfig
import Testing

@Suite(.timeLimit(.minutes(1))) struct URLPatternTests {
    private func matches(_ pattern: String, _ url: String, port: Int = 80) throws -> Bool {
        let parsed = try URLPattern(parsing: pattern)
        let rest = url.dropFirst("http://".count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        return parsed.matches(
            scheme: "http", host: String(rest[..<slash]), port: port, pathAndQuery: rest[slash...].isEmpty ? "/" : String(rest[slash...]))
    }

    @Test func hostLabelGlobsMatchOneOrMoreLabels() throws {
        #expect(try matches("http://*.example.com/*", "http://a.example.com/x"))
        #expect(try matches("http://*.example.com/*", "http://a.b.example.com/x"))
        #expect(try !matches("http://*.example.com/*", "http://example.com/x"))
        #expect(try matches("http://mirror*.example.org/*", "http://mirror2.example.org/"))
        #expect(try !matches("http://mirror*.example.org/*", "http://mirror.a.example.org/"))
    }

    @Test func pathGlobsAndExactPaths() throws {
        #expect(try matches("http://deb.debian.org/debian/pool/*", "http://deb.debian.org/debian/pool/main/a.deb"))
        #expect(try !matches("http://deb.debian.org/debian/pool/*", "http://deb.debian.org/debian/dists/x"))
        #expect(try matches("http://api.internal/graphql", "http://api.internal/graphql"))
        #expect(try !matches("http://api.internal/graphql", "http://api.internal/graphql2"))
        #expect(try matches("http://h/", "http://h/"))
        #expect(try matches("http://h", "http://h/any/thing?q=1"))
    }

    /// `?*` at the end of a pattern ends the path: no `*` before it reaches into the query,
    /// and the query may be absent.
    @Test func aTrailingQuestionStarEndsThePathWithAnyQuery() throws {
        let rpm = "http://*:*/*.rpm?*"
        #expect(try matches(rpm, "http://m/os/a-1.0.rpm"))
        #expect(try matches(rpm, "http://m/os/a-1.0.rpm?"))
        #expect(try matches(rpm, "http://m/os/a-1.0.rpm?token=x.rpm&b=1"))
        #expect(try !matches(rpm, "http://m/search?q=foo.rpm"), "the suffix is in the query")
        #expect(try !matches(rpm, "http://m/etc/x.rpmnew/y"), "the suffix is not the end of the path")
        #expect(try !matches(rpm, "http://m/a.rpm.html"))
        let repodata = "http://*:*/*/repodata/*?*"
        #expect(try matches(repodata, "http://m/os/repodata/abc-primary.xml.zst"))
        #expect(try !matches(repodata, "http://m/os/repodata/"), "a directory listing is no file")
        #expect(try !matches(repodata, "http://m/os/repodata/?C=M;O=A"))
        #expect(try !matches("http://*:*/*?*", "http://m/"))
        #expect(try matches("http://*:*/*.rpm*", "http://m/search?q=foo.rpm"), "a plain * still crosses into the query")
        #expect(try matches("http://h/a?b=*", "http://h/a?b=1") && !matches("http://h/a?b=*", "http://h/a"), "elsewhere ? is literal")
        let captured = try URLPattern(parsing: "http://h/{dir}/{file}.deb?*")
        #expect(captured.captures(in: "/pool/a_1.deb?sig=1") == ["dir": "pool", "file": "a_1"])
        #expect(captured.captures(in: "/pool/a_1.deb") == ["dir": "pool", "file": "a_1"])
        #expect(captured.captures(in: "/x?q=/pool/a_1.deb").isEmpty)
        #expect(captured.capture(named: "file", in: "/pool/a_1.deb?sig=1") == "a_1")
        #expect(captured.capture(named: "query", in: "/pool/a_1.deb?sig=1") == nil, "no such capture")
        #expect(captured.capture(named: "file", in: "/x?q=/pool/a_1.deb") == nil)
        let file = try URLPattern(parsing: "http://h/{dir}/{file}?*")
        #expect(file.captures(in: "/pool/") == [:], "a directory does not match, so captures nothing")
        #expect(file.captures(in: "/pool/a?b") == ["dir": "pool", "file": "a"])
    }

    @Test func portsDefaultToTheSchemesUnlessGiven() throws {
        #expect(try !matches("http://h/*", "http://h/x", port: 8080))
        #expect(try matches("http://h:8080/*", "http://h/x", port: 8080))
        #expect(try matches("http://h:*/*", "http://h/x", port: 9999))
    }

    @Test func firstMatchingRouteWinsAmongHundreds() throws {
        var routes: [Route] = []
        for index in 0..<500 {
            routes.append(Route(match: try URLPattern(parsing: "http://host\(index).example.com/*")))
        }
        var globbed = Route(match: try URLPattern(parsing: "http://*.example.com/special/*"))
        globbed.policy = .networkOnly
        routes.insert(globbed, at: 10)
        let table = RouteTable(routes)
        let hit = table.match(method: "GET", scheme: "http", host: "host400.example.com", port: 80, pathAndQuery: "/special/x")
        #expect(hit?.policy == .networkOnly, "the glob route comes first in the file")
        let other = table.match(method: "GET", scheme: "http", host: "host400.example.com", port: 80, pathAndQuery: "/other")
        #expect(other?.match.text == "http://host400.example.com/*")
        #expect(table.match(method: "GET", scheme: "http", host: "elsewhere.org", port: 80, pathAndQuery: "/") == nil)
    }

    @Test func methodsRestrictARoute() throws {
        var route = Route(match: try URLPattern(parsing: "http://api.internal/*"))
        route.methods = ["POST"]
        let table = RouteTable([route])
        #expect(table.match(method: "POST", scheme: "http", host: "api.internal", port: 80, pathAndQuery: "/q") != nil)
        #expect(table.match(method: "GET", scheme: "http", host: "api.internal", port: 80, pathAndQuery: "/q") == nil)
    }
}

import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// What a response may become once its head is in: a 304 refresh, a HEAD's update of the
/// stored response, an invalidation (RFC 9111 §3, §4.3.4, §4.3.5, §4.4).
extension Fill {
    /// A 304 to a validation request (RFC 9111 §4.3.3, §4.3.4): the stored response, updated
    /// with the 304's fields and times, goes back into the tiers and answers every reader.
    func refresh(_ validating: StoredResponse, with notModified: ResponseHead, storing: Bool = true, retiming: Bool = false) {
        upstreamStatus = 304
        // One client's 304 (`storing` false: its other readers are already released) answers
        // that client with its own cookie, and leaves the stored entry as it was, or (one
        // client's only for its cookie) takes its freshness alone.
        let updated = validating.freshened(
            by: notModified.headers, requestTime: requestTime, responseTime: responseTime, forOneClient: !storing)
        if storing {
            proxy.cache.refresh(updated, of: validating, promoting: true, stamp: stamp)
        } else if retiming {
            let retimed = validating.retimed(by: notModified.headers, requestTime: requestTime, responseTime: responseTime)
            proxy.cache.refresh(retimed, of: validating, promoting: true, stamp: stamp)
            refreshedForJoiners = retimed
        }
        refreshed = updated
        proxy.telemetry.stats[.revalidated].add(1)
        releaseOtherVariants(of: updated, vary: notModified.headers)
        proxy.coalescer.remove(self)
        scheduleNotify()
    }

    /// Whether a 304's ETag names another representation than `stored`, the response it
    /// validated (RFC 9111 §4.3.4): no stored response has that validator, so none may be
    /// updated. Compared weakly: a server that weakens the tag of what it compresses (nginx's
    /// gzip) sends its 304 with the strong one, for the same representation. A 304 without
    /// an ETag leaves the stored response validated as the one selected.
    /// More than one ETag field must each name it.
    static func namesAnotherRepresentation(_ notModified: HTTPHeaders, than stored: StoredResponse) -> Bool {
        guard notModified.contains(.etag) else { return false }
        guard let storedTag = stored.etag else { return true }
        return notModified.values("ETag").contains { !EntityTag.weakMatch($0, storedTag) }
    }

    /// RFC 9111 §4.3.5: a HEAD's 200 that `matches` the stored GET response it was sent for
    /// updates its fields as a 304 would (§3.2), without reading its body into memory; one
    /// that does not shows the stored copy is outdated.
    func updateStored(from head: ResponseHead, matches: Bool) {
        guard let stored = options.validating ?? options.fallback else { return }
        if matches {
            let updated = stored.freshened(by: head.headers, requestTime: requestTime, responseTime: responseTime)
            proxy.cache.refresh(updated, of: stored, promoting: false, stamp: stamp)
            proxy.telemetry.stats[.revalidated].add(1)
        } else {
            proxy.cache.invalidate(stored)
        }
    }

    /// RFC 9111 §4.4: a successful unsafe request invalidates the target URI and the
    /// Location and Content-Location URIs of the same origin. Never an immutable route's entry:
    /// it does not change under its URL, and its key may be shared with other hosts (a merged
    /// or digest key), so a request to one host must not remove what another host filled.
    func invalidate(_ response: ResponseHead) {
        var keys = options.immutableRoute ? [] : [key]
        let base = CacheKey.origin(of: CacheKey(fetch.request.url).url)
        let routes = proxy.runtime.routes
        for name in ["Location", "Content-Location"] {
            guard let value = response.headers[name],
                let url = try? AbsoluteURL(parsing: value.hasPrefix("/") ? base + value : value),
                CacheKey.origin(of: CacheKey(url).url) == base
            else { continue }
            let route = routes.match(
                method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery)
            if route?.immutable != true { keys.append(CacheKey(url)) }
        }
        // Slices too: they are stored responses of the same URI.
        for key in keys { proxy.cache.invalidateObject(key) }
        proxy.telemetry.stats[.invalidations].add(keys.count)
    }

    /// What the admission needs to know about the request this fill sent, answered `status`.
    /// After a 304 that updated nothing, the fill validates nothing: its answers are the object's.
    func admissionRequest(for status: Int) -> ResponseAdmission.Request {
        ResponseAdmission.Request(
            method: method, headers: requestHeaders, policy: options.policy, directives: options.requestDirectives,
            validating: fetch.validationRefused ? nil : options.validating, fallback: options.fallback,
            staleIfErrorWindow: settings.staleIfError,
            dedupAlways: dedupAlways, maxMemoryObject: settings.maxMemoryObject,
            negativeTTL: settings.negativeTTL, sharedKey: options.sharedKey,
            holdsSuccess: options.policy == .cacheFirst && !CacheDecision.isSuccess(status) && holdsSuccess(),
            ownSelectors: options.ownSelectors, ownContent: options.ownContent, contentAddressed: options.digest != nil,
            requestTime: requestTime)
    }

    /// Whether a success is stored for the key: the stored response this fill validates or
    /// falls back on, else anything the tiers hold whole or as slices (a probe, on a failure
    /// only; a stale failure stored is known through the fallback and may be replaced).
    private func holdsSuccess() -> Bool {
        if let known = options.validating ?? options.fallback { return CacheDecision.isSuccess(known.status) }
        let cache = proxy.cache
        return cache.holds(key) || cache.mayHoldSlices && cache.holds(key.slice(0))
    }
}

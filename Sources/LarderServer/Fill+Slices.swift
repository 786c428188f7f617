import LarderCache
import LarderHTTP
import LarderIO

/// Slices (`cache.slice_size`): a fill for one slice of an object (its request carries the
/// slice's Range), and a whole response too large to store as one entry, stored slice by slice.
extension Fill {
    /// A slice fill's 206, before it is judged: one that covers the whole object becomes the
    /// 200 it is (stored under the object's own key); one that is exactly the slice asked for
    /// is returned, to be stored as that slice. Anything else is never stored; its readers
    /// take what ``SlicePlan/Reply`` says it holds.
    func sliceOfResponse(_ forwarded: inout ResponseHead) -> ContentRange? {
        guard let slice = options.slice, forwarded.status == 206,
            let range = forwarded.headers["Content-Range"].flatMap(ContentRange.init)
        else { return nil }
        // RFC 9110 §14.4: the body is exactly the range. A body not framed by a length is held
        // to that count (one longer or shorter fails, unstored); a length unlike it, or a
        // multipart body, makes the answer one no slice is taken from.
        let count = range.last - range.first + 1
        if contentLength == nil { contentLength = count }
        guard case .part = SlicePlan.Reply(status: 206, headers: forwarded.headers, bodyLength: contentLength) else { return nil }
        if range.first == 0 && range.last == range.length - 1 {
            // RFC 9111 §3.4: a partial response holding every byte is the complete response.
            forwarded.status = 200
            forwarded.reason = HTTPStatus.reason(200)
            forwarded.headers.remove("Content-Range")
            return nil
        }
        let first = slice.index * slice.size
        guard range.first == first, range.last == min(first + slice.size - 1, range.length - 1) else { return nil }
        return range
    }

    /// Stores a slice fill's 206 as that slice's entry (disk only, strong validator required:
    /// slices are only ever combined when they share one).
    func storeSlice(_ forwarded: ResponseHead, range: ContentRange, as admission: ResponseAdmission) {
        retainAll = false
        wholeEntryParts = nil
        willStore = false
        guard let slice = options.slice, admission.storage != .none, SlicePlan.combines(forwarded.headers),
            let maxObject = proxy.shared.cache.maxDiskObjectBytes, Int64(range.length) <= maxObject
        else { return }
        var stored = forwarded.headers
        stored.remove("Age")
        let sliceKey = key.slice(slice.index)
        let diskHead = DiskEntryFormat.Head(
            key: sliceKey.url, status: 206, reason: forwarded.reason, requestTime: requestTime, responseTime: responseTime,
            vary: VaryMatcher.values(for: forwarded.headers, request: requestHeaders), headers: stored, url: options.storedURL)
        guard let write = proxy.shared.cache.beginDiskWrite(key: sliceKey, head: diskHead, expectedLength: contentLength) else {
            return
        }
        for chunk in chunks { write.append(chunk) }
        diskWrite = write
        willStore = true
    }

    /// Whether a whole response about to be stored goes to disk as slices: larger than a slice,
    /// a 200 to a GET with a strong validator (RFC 9111 §3.4) that later slice fills can be
    /// checked against, and within `disk.max_object_bytes` as a whole.
    func storesAsSlices(_ forwarded: ResponseHead, admission: ResponseAdmission) -> Bool {
        // A digest covers the whole body: a route that checks one never stores it in slices.
        guard sliceSize > 0, options.digest == nil, method == .get, forwarded.status == 200, admission.storage != .none,
            let contentLength, contentLength > sliceSize, SlicePlan.combines(forwarded.headers),
            let maxObject = proxy.shared.cache.maxDiskObjectBytes, Int64(contentLength) <= maxObject
        else { return false }
        return true
    }

    /// Starts storing the body as slices, beginning with what already arrived.
    func startSlicedWrite(_ forwarded: ResponseHead) {
        retainAll = false
        wholeEntryParts = nil
        pendingDiskHead = nil
        var stored = forwarded.headers
        stored.remove("Age")
        let template = DiskEntryFormat.Head(
            key: key.url, status: 206, reason: HTTPStatus.reason(206), requestTime: requestTime, responseTime: responseTime,
            vary: VaryMatcher.values(for: forwarded.headers, request: requestHeaders), headers: stored, url: options.storedURL)
        let write = SlicedDiskWrite(cache: proxy.shared.cache, key: key, size: sliceSize, length: contentLength ?? 0, head: template)
        for chunk in chunks { write.append(chunk) }
        slicedWrite = write
        // The object's own key must not keep an older whole copy beside the new slices.
        proxy.shared.cache.purge(key)
        willStore = !write.hasFailed
    }
}

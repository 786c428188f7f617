import LarderCache
import LarderHTTP
import LarderIO

/// Slices (`cache.slice_size`): a fill for one slice of an object (its request carries the
/// slice's Range), and a whole response too large to store as one entry, stored slice by slice.
extension Fill {
    /// A slice fill's 206, before it is judged: one that covers the whole object becomes the
    /// 200 it is (stored under the object's own key); one that is exactly the slice asked for
    /// is returned, to be stored as that slice. Anything else is forwarded as it came.
    func sliceOfResponse(_ forwarded: inout ResponseHead) -> ContentRange? {
        guard let slice = options.slice, forwarded.status == 206,
            let range = forwarded.headers["Content-Range"].flatMap(ContentRange.init)
        else { return nil }
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

    /// Stores a slice fill's 206 as that slice's entry (the plan checked it may be: disk only,
    /// validator required, as slices are only ever combined when they share one).
    func storeSlice(_ forwarded: ResponseHead) {
        retainAll = false
        wholeEntryParts = nil
        willStore = false
        guard let slice = options.slice else { return }
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

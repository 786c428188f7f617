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
}

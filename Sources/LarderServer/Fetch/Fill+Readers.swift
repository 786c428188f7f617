import LarderCache
import LarderHTTP

/// Who may read a fill, and what a reader may take: readers join by URL (``Coalescer``) before
/// any Vary, `private` or range is known, so each is checked against the response (RFC 9111
/// §4.1, §3), the fill's own reader (``FillBuffer/Reader/isOwn``) excepted, wherever it stands.
extension Fill {
    /// Whether a new reader can still start from byte 0: nothing received yet, or every byte
    /// still in memory, or the bytes dropped from memory readable from the disk file.
    var acceptsLateReaders: Bool {
        guard shareable, outcome == nil, !diskCopyDamaged else { return false }
        let backing = backing
        return buffer.holdsFromStart(backing)
    }

    func attach(_ reader: any FillReader, requestHeaders: HTTPHeaders) {
        buffer.readers.append(FillBuffer.Reader(reader: reader, position: 0, requestHeaders: requestHeaders))
        // Checked whoever else reads: the fill's own reader may have left, or never was (a
        // background refresh).
        if let head,
            !Shareability.sameVariant(
                responseHeaders: head.headers, fillRequest: self.requestHeaders, waiter: requestHeaders)
        {
            release(at: buffer.readers.count - 1, reason: .otherVariant(head.headers.listElements("Vary")))
            return
        }
        // A reader of a fill that has nothing yet hears of it with the head.
        if head != nil || outcome != nil { scheduleNotify() }
    }

    /// Releases the readers that may not receive this response: all but the fill's own reader
    /// (``FillBuffer/Reader/isOwn``) when it may not be shared at all, or those whose request
    /// selects another variant. The own reader is found by its mark, never by its place: the
    /// first reader may be one that joined a background refresh, or joined after the fill's
    /// own reader left.
    func share(_ forwarded: ResponseHead, shareable: Bool) {
        self.shareable = shareable
        var index = 0
        if !shareable {
            proxy.coalescer.markNotShareable(self, ttl: settings.notShareableTTL)
            // The reader the fill was made for keeps it; everyone who attached goes on alone.
            releaseAllButOwn()
            return
        }
        while index < buffer.readers.count {
            if buffer.readers[index].isOwn
                || Shareability.sameVariant(
                    responseHeaders: forwarded.headers, fillRequest: requestHeaders, waiter: buffer.readers[index].requestHeaders)
            {
                index += 1
            } else {
                release(at: index, reason: .otherVariant(forwarded.headers.listElements("Vary")))
            }
        }
    }

    /// Releases every reader but the fill's own to ask for their own answer, and leaves the
    /// key as it is: one client's 304 says nothing of the URL's next answers, and marking it
    /// (``Coalescer/markNotShareable(_:ttl:)``) would let any client that provokes one turn
    /// coalescing off for everyone.
    func releaseAllButOwn() {
        var index = 0
        while index < buffer.readers.count {
            if buffer.readers[index].isOwn { index += 1 } else { release(at: index, reason: .notShareable) }
        }
    }

    /// Releases the readers whose request selects another variant than `stored` (RFC 9111
    /// §4.1: they joined by URL, before any Vary was known), to ask for their own; `vary`: the
    /// fields whose Vary names them. The fill's own reader found `stored` by its request.
    func releaseOtherVariants(of stored: StoredResponse, vary: HTTPHeaders) {
        var index = 0
        while index < buffer.readers.count {
            if buffer.readers[index].isOwn || VaryMatcher.matches(stored, request: buffer.readers[index].requestHeaders) {
                index += 1
            } else {
                release(at: index, reason: .otherVariant(vary.listElements("Vary")))
            }
        }
    }

    /// Lets go of a reader that wants a range passed upstream as is.
    func releaseForRange(_ reader: any FillReader) {
        guard let index = buffer.readers.firstIndex(where: { $0.reader === reader }) else { return }
        release(at: index, reason: .passRange)
        if buffer.readers.isEmpty, outcome == nil, !worthFinishingAlone { cancel(reason: "the range goes upstream as is") }
    }

    /// Body bytes readers may send: all that arrived, but the last one while the digest is
    /// unchecked, so that a body that turns out wrong never looks complete to a client.
    var readableBytes: Int {
        switch digestCheck {
        case .none, .matched: received
        case .pending, .mismatched: max(0, received - 1)
        }
    }

    /// The stored response a 304 made the answer of `reader`: the fill's own reader's, or,
    /// when the 304 was that reader's alone but retimed the entry, the entry as it now stands.
    func refreshedAnswer(for reader: any FillReader) -> StoredResponse? {
        guard let joiners = refreshedForJoiners,
            buffer.readers.contains(where: { $0.reader === reader && !$0.isOwn })
        else { return refreshed }
        return joiners
    }

    /// The head readers may send: none while a digest check holds it back.
    var headForReaders: ResponseHead? { digestHoldsHead ? nil : head }

    /// What the fill has for a reader with no head yet, read in place (no copy of the head).
    var answerForReaders: FillNews.Answer {
        if refreshed != nil { return .refreshed }
        if staleAnswer != nil { return .stale }
        guard case .some = head, !digestHoldsHead else { return .pending }
        return .head
    }

    /// Where the body byte at `position` is, or nil if it has not arrived (``FillData/lost``
    /// when it will never be had again: the disk copy behind it failed).
    func data(at position: Int) -> FillData? {
        let data = buffer.data(at: position, slicedWrite: sink.slicedWrite)
        if case .lost? = data { diskCopyFailed() }
        return data
    }

    /// Records how far `reader` has taken the body.
    func reader(_ reader: any FillReader, advancedTo position: Int) {
        buffer.move(reader, to: position)
        trimAndResume()
    }
}

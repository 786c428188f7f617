/// What a fill offers one reader when it tells it of progress (once per batch of transfer
/// events, or when the client's output drained): read from the fill and the exchange by the
/// connection, decided on by ``Exchange/step(_:on:now:)`` as the event
/// ``Exchange/Event/fillProgressed(_:)``.
struct FillNews {
    /// What the fill has for a reader that has no response head yet.
    enum Answer: Equatable {
        /// Nothing yet (no head, or one a digest check still holds back).
        case pending
        /// A head readers may have.
        case head
        /// A 304 confirmed the stored response: it is the answer (RFC 9111 §4.3.4).
        case refreshed
        /// The origin failed and a stale stored response answers instead (RFC 5861 §4).
        case stale
    }

    /// How the transfer ended.
    enum Ended: Equatable {
        case complete
        /// The fill's outcome holds the error.
        case failed
    }

    /// Why the fill fails its reader.
    enum Failure: Equatable {
        /// The transfer failed before a head (the fill's outcome holds the error): an error
        /// answer.
        case beforeHead
        /// The transfer failed (the fill's outcome holds the error).
        case transfer
        /// The transfer ended with fewer (or more) body bytes than the client's head declared.
        case short(sent: Int, declared: Int)
    }

    var answer = Answer.pending
    /// Body bytes the reader may take (all that arrived, less what a digest check holds).
    var readable = 0
    /// The transfer's end, once it came.
    var ended: Ended?
    /// Where this client's bytes end (past the last byte of its range; `Int.max` for all).
    var end = Int.max
    /// The body length the client's head declared, if it declared one.
    var declared: Int?
    /// The body goes to the client chunked (its end is the last chunk).
    var chunked = false
    /// Body bytes queued to the client so far.
    var sent = 0

    /// The reader's next move before its response head: answer from the stored response the
    /// fill produced, queue the fill's head, fail with the fill's error, or wait.
    func beforeHead() -> (leaves: Bool, action: Exchange.Action) {
        switch answer {
        case .refreshed: return (true, .answerFromStore(stale: false))
        case .stale: return (true, .answerFromStore(stale: true))
        case .head: return (false, .queueHead)
        case .pending:
            if ended == .failed { return (true, .fail(.beforeHead)) }
            return (false, .wait)
        }
    }

    /// The reader's next move once its head is out, at body `position`; `blockPending`: a
    /// block of the fill's disk file is being read for it.
    func afterHead(position: Int, blockPending: Bool) -> Exchange.Action {
        // The client's range is complete; the fill goes on for the others (or the cache).
        if position >= end { return .finishBody(lastChunk: false) }
        // Every byte the head declared is queued: the response is complete for this client
        // (RFC 9112 §6.3), whatever the transfer's end still does for the cache.
        if ended == nil, let declared, sent == declared { return .finishBody(lastChunk: false) }
        // A reader whose range starts past what the transfer brought (a Range served from
        // a whole fetch) hears of its end too: it never gets closer.
        if position >= readable, let ended {
            switch ended {
            case .complete:
                // Fewer (or more) bytes than the head declared: never end it as if complete.
                if let declared, sent != declared { return .fail(.short(sent: sent, declared: declared)) }
                return .finishBody(lastChunk: chunked)
            case .failed:
                return .fail(.transfer)
            }
        }
        if !blockPending, position < min(end, readable) { return .sendBytes(upTo: min(end, readable)) }
        return .wait
    }
}

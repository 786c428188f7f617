/// The stages of an exchange and the steps between them, as a pure transition function
/// (unit-tested on its own); ``Exchange/advance(_:)`` takes every step through it, so a step
/// the design does not allow fails the debug build's tests at the point it happens.
extension Exchange {
    /// Where an exchange is in its life.
    enum Stage: Equatable, CaseIterable {
        /// Target checks, authentication, route.
        case routing
        /// The request body is read whole before going on (`proxy.request_body_buffer`, or the
        /// body hash of a `dedup = "always"` key).
        case awaitingRequestBody
        /// The cache decision: serve what is stored, revalidate it, or forward.
        case lookingUp
        /// A disk entry is being checked on the reader thread; the decision resumes after.
        case awaitingDisk
        /// Attached to an upstream fill (its own or a shared one), no response head queued yet.
        case readingFill
        /// The response head is queued; the body follows (from a fill).
        case responding
        /// Answered from an object's slices (`cache.slice_size`), one at a time, each from the
        /// tiers or a slice fill (``SlicePlan`` says where it is within).
        case slicing
        /// A CONNECT being set up (resolving, dialling, waiting for the hand-over).
        case tunnelling
        /// Every byte of the response queued, or the connection closed.
        case finished
    }

    /// What moves an exchange on.
    enum Event: Equatable, CaseIterable {
        /// Routed to a URL: the cache decision comes next.
        case routed
        /// A CONNECT was accepted for setting up.
        case connectAccepted
        /// The request body must be read whole first.
        case bodyNeeded
        /// The request body was read whole.
        case bodyRead
        /// A disk entry went to the reader thread to be checked.
        case diskCheckStarted
        /// The reader thread answered.
        case diskChecked
        /// Attached to a fill.
        case attached
        /// The object turned out to be stored (or fetched) in slices.
        case slicesBegun
        /// Released from a fill before its head (another variant, timed out, a range): the
        /// request is forwarded again.
        case released
        /// A fill's response head (or a 304/416 in its place) was queued.
        case headQueued
        /// Done (answered, or the connection closed).
        case finished
    }

    /// The stage `event` leads to from `stage`, or nil when the design has no such step.
    static func stage(after stage: Stage, on event: Event) -> Stage? {
        switch (stage, event) {
        case (.finished, _): nil
        case (_, .finished): .finished
        case (.routing, .routed): .lookingUp
        case (.routing, .connectAccepted): .tunnelling
        case (.lookingUp, .bodyNeeded): .awaitingRequestBody
        case (.awaitingRequestBody, .bodyRead): .lookingUp
        case (.lookingUp, .diskCheckStarted): .awaitingDisk
        case (.awaitingDisk, .diskChecked): .lookingUp
        case (.lookingUp, .attached): .readingFill
        case (.lookingUp, .slicesBegun): .slicing
        // No slice stored after all, or the origin answered a slice request whole: an
        // ordinary fill's response from here.
        case (.slicing, .attached): .readingFill
        case (.readingFill, .released): .lookingUp
        case (.readingFill, .headQueued): .responding
        default: nil
        }
    }

    /// The response head is queued (a fill's response is streaming).
    var headSent: Bool { stage == .responding || sliceHeadQueued }
    /// The request body is being read whole before the exchange goes on.
    var bufferingBody: Bool { stage == .awaitingRequestBody }
}

/// A closure the event loop keeps to run later (deferred work, before-wait work, a timer's
/// callback). Stored as a struct's field: an array or a dictionary of bare closures keeps each
/// one in the most general calling convention, which wraps it in an allocated thunk every
/// time one is added.
struct LoopWork {
    let body: () -> Void
}

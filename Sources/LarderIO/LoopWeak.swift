/// What `[weak self]` gives a closure queued on an event loop (a reference that does not keep
/// its object alive and reads nil once the object is gone) for long-lived, loop-confined
/// objects that are retained on the request path. A weak reference gives its object a side
/// table, and from then on every retain and release of that object takes the runtime's slow
/// path; this reference leaves the object as it is. The object clears it in its `deinit`.
///
/// State: loop-confined. The object, its `deinit` and every closure that reads ``object`` run
/// on one loop's thread, so a read cannot race the clearing. Not for objects another thread
/// may release.
public final class LoopWeak<Object: AnyObject> {
    /// The object, or nil once its `deinit` called ``clear()``.
    public private(set) unowned(unsafe) var object: Object?

    public init(_ object: Object) {
        self.object = object
    }

    /// Called from the object's `deinit`: closures still queued find nil.
    public func clear() {
        object = nil
    }
}

import LarderCache
import LarderConfig

/// What every fill reads of the configuration, worked out once per loaded configuration
/// (``RuntimeConfig/fill``): a fill started after a reload takes the new values, one already
/// running keeps those it started with. A new setting a fill reads is added here alone.
struct FillSettings: Sendable, Equatable {
    /// `memory.max_object_bytes`: the largest body the memory tier takes.
    let maxMemoryObject: Int
    /// `coalesce.finish_abandoned_max`: how much is still fetched once every client left.
    let finishAbandonedMax: Int
    /// `cache.range_whole_max`: the largest object fetched whole for a client's range.
    let rangeWholeMax: Int
    /// `cache.slice_size`: a whole response larger than this is stored as slices (0: never).
    let sliceSize: Int
    /// `cache.admission`.
    let admission: AdmissionPolicy
    /// `cache.admission_min_bytes`.
    let admissionMinBytes: Int
    /// `cache.stale_if_error`, in seconds.
    let staleIfError: Double
    /// `cache.negative_ttl`, in seconds.
    let negativeTTL: Double
    /// `coalesce.not_shareable_ttl`, in nanoseconds: how long a key whose answer was not
    /// shareable sends requests their own way.
    let notShareableTTL: UInt64

    init(_ config: Config) {
        maxMemoryObject = config.memory.maxObjectBytes
        finishAbandonedMax = config.coalesce.finishAbandonedMax
        rangeWholeMax = config.cache.rangeWholeMax
        sliceSize = config.cache.sliceSize
        admission = config.cache.admission
        admissionMinBytes = config.cache.admissionMinBytes
        // A `Duration`'s seconds take 128-bit arithmetic: worked out here, not per fill.
        staleIfError = config.cache.staleIfError.totalSeconds
        negativeTTL = config.cache.negativeTTL.totalSeconds
        notShareableTTL = config.coalesce.notShareableTTL.totalNanoseconds
    }
}

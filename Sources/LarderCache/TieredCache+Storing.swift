import LarderConfig
import LarderHTTP

/// Storing: the plan for an origin's answer, and the sink that carries it out. The fill asks
/// for a plan when the head arrives, opens the sink it needs, and hands the body to it; which tier takes
/// the response, and how, is decided here alone.
extension TieredCache {
    /// The storage plan for an origin's answer (``StoragePlan/decide(_:answer:slicing:disk:now:admitted:)``)
    /// with the tiers as they are now: the disk tier's limits and health, slices only with a
    /// disk tier, and the doorkeeper of `cache.admission` (`policy`, `minBytes`) for `key`.
    /// A decision the fill consults when an origin's head arrives; it opens the sink the plan
    /// needs (``open(_:head:cacheControl:entry:replacing:)``) last, once it has carried out the
    /// plan's other actions.
    public func plan(
        _ request: ResponseAdmission.Request, answer: StoragePlan.Answer, slicing: StoragePlan.Slicing, key: CacheKey,
        policy: AdmissionPolicy, minBytes: Int, now: Double
    ) -> StoragePlan {
        var slicing = slicing
        if disk == nil { slicing.size = 0 }
        return StoragePlan.decide(request, answer: answer, slicing: slicing, disk: diskTier, now: now) { length in
            admits(key, length: length, policy: policy, minBytes: minBytes)
        }
    }

    /// Drops the slices sent in parts whose next part did not come in time (``SliceAssemblies``):
    /// their disk writes hold a descriptor and a temporary file each.
    public func expireSliceParts(now: Double) { assemblies.expire(now: now) }

    /// Whether there is a disk tier (false when its directory could not be set up).
    public var hasDiskTier: Bool { disk != nil }

    /// How many disk entry files stay open for hits on the event loops
    /// (``DiskCache/openFileLimit``); nothing without a disk tier.
    public func keepEntryFilesOpen(_ count: Int) { disk?.openFileLimit = count }

    /// Lets go of kept entry files removed since (``DiskCache/forgetRemovedFiles()``).
    public func forgetRemovedEntryFiles() { disk?.forgetRemovedFiles() }

    /// The disk tier as a storage plan sees it now (nil: none).
    public var diskTier: ResponseAdmission.DiskTier? {
        disk.map { ResponseAdmission.DiskTier(maxObjectBytes: $0.currentLimits.maxObjectBytes, acceptingWrites: !$0.isDegraded) }
    }

    /// Opens the sink that stores `head` (as forwarded, hop-by-hop fields removed) as `plan`
    /// says: the whole body kept for the memory tier and a segment record, or a disk write
    /// started for the entry, for one slice of it, for the whole slices inside another range
    /// (a slice fill's or a client's own), for every slice of the object (whose older whole
    /// copy goes), or a part of a slice sent in parts joined to that slice's assembly
    /// (``SliceAssemblies``). A sink that stores nothing for any other plan, or when the disk
    /// tier refuses the write; then `replacing`, the stored response the fill validated, goes
    /// unless the plan keeps it: the origin sent a new response, which will not be stored.
    public func open(
        _ plan: StoragePlan, head: ResponseHead, cacheControl: CacheControl, entry: consuming StoreSink.Entry,
        replacing: StoredResponse?
    ) -> StoreSink {
        let sink = sink(for: plan, head: head, cacheControl: cacheControl, entry: entry)
        if let replacing, plan.outdatesValidated(stored: sink.stores) { invalidate(replacing) }
        return sink
    }

    private func sink(
        for plan: StoragePlan, head: ResponseHead, cacheControl: CacheControl, entry: consuming StoreSink.Entry
    ) -> StoreSink {
        guard plan.stores else { return StoreSink() }
        var stored = head.headers
        stored.remove(.age)
        let vary = VaryMatcher.values(for: head.headers, request: entry.requestHeaders)
        // Built where a case needs it, and moved in: a copy of it costs every miss that stores.
        let (url, storedURL, requestTime, responseTime) = (entry.key.url, entry.url, entry.requestTime, entry.responseTime)
        func diskHead() -> DiskEntryFormat.Head {
            DiskEntryFormat.Head(
                key: url, status: head.status, reason: head.reason, requestTime: requestTime, responseTime: responseTime,
                vary: vary, headers: stored, url: storedURL)
        }
        switch plan.action {
        case .whole:
            let whole = StoreSink.WholeEntry(
                status: head.status, reason: head.reason, cacheControl: cacheControl, lifetime: plan.admission.lifetime,
                initialAge: plan.admission.initialAge,
                vary: vary, headers: stored,
                head: StoredResponse.serializeHead(status: head.status, reason: head.reason, headers: stored),
                isClientHead: stored.count == head.headers.count)
            return StoreSink(
                cache: self, entry: entry, wholeLimit: plan.wholeLimit, whole: whole, pendingDiskHead: disk != nil ? diskHead() : nil)
        case .streamed:
            var sink = StoreSink(cache: self, entry: entry, wholeLimit: plan.wholeLimit)
            sink.startDiskWrite(diskHead(), chunks: [])
            sink.stores = sink.diskWrite != nil
            return sink
        case .slice:
            guard let index = entry.sliceIndex else { return StoreSink() }
            let key = entry.key.slice(index)
            // A copy promoted from an older disk slice must not answer beside the new one (nor
            // one whose promotion is in flight: it goes when the new slice is indexed).
            memory.remove(key)
            var diskHead = diskHead()
            diskHead.key = key.url
            diskHead.status = 206
            guard let write = beginDiskWrite(key: key, head: diskHead, expectedLength: entry.contentLength, stamp: entry.stamp) else {
                return StoreSink()
            }
            var sink = StoreSink(cache: self, entry: entry, wholeLimit: plan.wholeLimit)
            sink.diskWrite = write
            sink.stores = true
            return sink
        case .slicesWithin(let range):
            guard entry.sliceSize > 0 else { return StoreSink() }
            var diskHead = diskHead()
            diskHead.status = 206
            diskHead.reason = HTTPStatus.reason(206)
            // Each slice carries its own range.
            diskHead.headers.remove("Content-Range")
            // Promoted copies of older slices must not answer beside the new ones.
            memory.removeSlices(of: entry.key)
            let write = SlicedDiskWrite(
                cache: self, key: entry.key, size: entry.sliceSize, range: range, head: diskHead, stamp: entry.stamp)
            var sink = StoreSink(cache: self, entry: entry, wholeLimit: plan.wholeLimit)
            sink.rangeSlices = write
            sink.stores = true
            return sink
        case .slicePart(let range):
            guard let index = entry.sliceIndex, entry.sliceSize > 0 else { return StoreSink() }
            let first = index * entry.sliceSize
            let slice = ContentRange(first: first, last: min(first + entry.sliceSize, range.length) - 1, length: range.length)
            // Only a part of the slice the fill asked for.
            guard range.first >= slice.first, range.last <= slice.last else { return StoreSink() }
            let key = entry.key.slice(index)
            memory.remove(key)
            let part = assemblies.join(key, slice: slice, range: range, headers: head.headers, now: entry.responseTime) {
                var diskHead = diskHead()
                diskHead.key = key.url
                diskHead.status = 206
                diskHead.reason = HTTPStatus.reason(206)
                // The entry is the whole slice: its Content-Range, not the part's.
                diskHead.headers.remove("Content-Range")
                diskHead.headers.add("Content-Range", slice.fieldValue)
                return beginDiskWrite(key: key, head: diskHead, expectedLength: slice.last - slice.first + 1, stamp: entry.stamp)
            }
            guard let part else { return StoreSink() }
            var sink = StoreSink(cache: self, entry: entry, wholeLimit: plan.wholeLimit)
            sink.parts?.assembly = part
            sink.stores = true
            return sink
        case .slices:
            // Neither the object's own key (an older whole copy) nor its older slices, on either
            // tier, may answer beside the new slices (nor one whose promotion is in flight: it
            // finds its disk entry gone, ``promote(_:stamp:)``). Unless it is the very object
            // they belong to: a transfer cut before it wrote them again would lose them.
            if !entry.keepsSlices { invalidateObject(entry.key) }
            var diskHead = diskHead()
            diskHead.status = 206
            diskHead.reason = HTTPStatus.reason(206)
            let write = SlicedDiskWrite(
                cache: self, key: entry.key, size: entry.sliceSize, length: entry.contentLength ?? 0, head: diskHead,
                stamp: entry.stamp)
            var sink = StoreSink(cache: self, entry: entry, wholeLimit: plan.wholeLimit)
            sink.slicedWrite = write
            sink.stores = !write.hasFailed
            return sink
        default:
            return StoreSink()
        }
    }
}

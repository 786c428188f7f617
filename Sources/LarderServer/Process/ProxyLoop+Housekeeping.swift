import LarderIO

extension ProxyLoop {
    /// How often loop 0 asks for the housekeeping below.
    static let housekeepingInterval: UInt64 = 5_000_000_000

    /// On loop 0, every ``housekeepingInterval`` until the daemon drains: the disk tier lets go
    /// of kept entry files removed since (by hand: nothing else frees their space while nobody
    /// asks for their URLs). The work runs on the disk writer thread, not here.
    func startHousekeeping() {
        let loop = self.loop
        let weakSelf = self.weakSelf
        // `tick` reschedules itself: it captures the loop and the weak reference, never self.
        func tick() {
            loop.schedule(afterNanos: ProxyLoop.housekeepingInterval) {
                guard let proxy = weakSelf.object, !proxy.isDraining else { return }
                proxy.cache.forgetRemovedEntryFiles()
                tick()
            }
        }
        tick()
    }
}

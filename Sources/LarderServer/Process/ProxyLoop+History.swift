import LarderIO

extension ProxyLoop {
    /// On loop 0: samples the counters into ``StatsHistory`` now and every interval after, until
    /// the daemon drains.
    func startHistory() {
        let history = telemetry.history
        let loop = self.loop
        let weakSelf = self.weakSelf
        // `tick` reschedules itself: it captures the loop and the weak reference, never self.
        func tick() {
            guard let proxy = weakSelf.object, !proxy.isDraining else { return }
            history.sample(proxy.telemetry.stats, uptime: proxy.telemetry.uptime)
            loop.schedule(afterNanos: history.interval) { tick() }
        }
        tick()
    }
}

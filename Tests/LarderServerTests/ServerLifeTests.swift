import Testing

@testable import LarderServer

@Suite struct ServerLifeTests {
    @Test func theDaemonGoesFromStartingToStoppedOnlyThroughItsStages() {
        let events: [ServerLife.Event] = [.started, .startFailed, .drainRequested(now: 100, timeout: 50), .loopsStopped]
        let stages: [ServerLife] = [.starting, .running, .draining(deadline: 150), .stopped]
        // (stage, event) -> the next stage; every pair not listed is refused.
        let allowed: [(ServerLife, ServerLife.Event, ServerLife)] = [
            (.starting, .started, .running),
            (.starting, .startFailed, .stopped),
            (.running, .drainRequested(now: 100, timeout: 50), .draining(deadline: 150)),
            (.draining(deadline: 150), .loopsStopped, .stopped),
        ]
        for stage in stages {
            for event in events {
                let expected = allowed.first { $0.0 == stage && $0.1 == event }?.2
                #expect(stage.after(event) == expected, "\(stage) on \(event)")
            }
        }
    }

    @Test func onlyARunningDaemonTakesReloads() {
        #expect(ServerLife.running.acceptsReload)
        for stage in [ServerLife.starting, .draining(deadline: 1), .stopped] {
            #expect(!stage.acceptsReload, "\(stage)")
        }
    }

    @Test func theDrainEndsAtItsDeadline() {
        let draining = ServerLife.draining(deadline: 1_000)
        #expect(!draining.drainExpired(now: 999))
        #expect(draining.drainExpired(now: 1_000))
        #expect(!ServerLife.running.drainExpired(now: .max))
    }
}

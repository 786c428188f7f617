import Testing

@testable import LarderServer

/// The attach-or-start decision, case by case: what a request does about the fills in flight
/// for its coalescing key, whole object or slice alike.
@Suite struct CoalescerStepTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let hasKey: Bool
        let notShareable: Bool
        let local: (ended: Bool, acceptsLateReaders: Bool, readerCount: Int)?
        let expected: Coalescer.Step
        var testDescription: String { name }
    }

    static let maxWaiters = 3

    static let cases: [Case] = [
        Case(name: "no key: alone, nothing claimed", hasKey: false, notShareable: false, local: nil, expected: .alone),
        Case(
            name: "no key, a fill under another key ignored", hasKey: false, notShareable: false, local: (false, true, 0), expected: .alone),
        Case(name: "not shareable: alone", hasKey: true, notShareable: true, local: nil, expected: .alone),
        Case(name: "not shareable beats a fill in flight", hasKey: true, notShareable: true, local: (false, true, 1), expected: .alone),
        Case(name: "no fill here: claim", hasKey: true, notShareable: false, local: nil, expected: .claim),
        Case(name: "a fill with room: attach", hasKey: true, notShareable: false, local: (false, true, 0), expected: .attach),
        Case(name: "one waiter short of the limit: attach", hasKey: true, notShareable: false, local: (false, true, 2), expected: .attach),
        Case(name: "the limit reached: alone, unregistered", hasKey: true, notShareable: false, local: (false, true, 3), expected: .alone),
        Case(name: "too late to join: alone", hasKey: true, notShareable: false, local: (false, false, 0), expected: .alone),
        Case(
            name: "a fill that ended, its key not yet released: claim", hasKey: true, notShareable: false, local: (true, false, 1),
            expected: .claim),
        Case(name: "ended, not shareable: alone", hasKey: true, notShareable: true, local: (true, false, 0), expected: .alone),
    ]

    @Test(arguments: cases) func step(_ test: Case) {
        let step = Coalescer.step(
            hasKey: test.hasKey, notShareable: test.notShareable, local: test.local, maxWaiters: CoalescerStepTests.maxWaiters)
        #expect(step == test.expected)
    }
}

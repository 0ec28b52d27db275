import SyncProtocol
import Testing

/// `OUTPOST_FAULT_DELAY_MS`, the crash tests' pauses: read strictly, off unless set.
@Suite("Fault pauses")
struct FaultPausesTests {
    private func parse(_ text: String) throws(FaultPauses.Malformed) -> [FaultPoint: FaultPauses.Pause] {
        try FaultPauses.fromEnvironment([FaultPauses.environmentVariable: text]).pauses
    }

    @Test("Unset or empty pauses nowhere")
    func offByDefault() throws {
        #expect(try FaultPauses.fromEnvironment([:]).pauses.isEmpty)
        #expect(try parse("").isEmpty)
    }

    @Test("Points with a delay, every time or at the Nth time")
    func points() throws {
        #expect(try parse("push-before-answer:3000") == [.pushBeforeAnswer: FaultPauses.Pause(milliseconds: 3000)])
        #expect(
            try parse("pull-apply#4:60000,push-before-answer:0") == [
                .pullApply: FaultPauses.Pause(milliseconds: 60000, occurrence: 4), .pushBeforeAnswer: FaultPauses.Pause(milliseconds: 0),
            ])
    }

    @Test(
        "A typo is refused by name, never ignored",
        arguments: [
            "push-before-anser:10", "pull-apply", "pull-apply:", "pull-apply:-1", "pull-apply:ten", "pull-apply#0:10", "pull-apply#x:10",
        ])
    func malformed(_ text: String) {
        #expect(throws: FaultPauses.Malformed.self) { try parse(text) }
    }

    @Test("A pause at the Nth time lets the others through at once")
    func nthOccurrence() {
        let pauses = FaultPauses(pauses: [.pullApply: FaultPauses.Pause(milliseconds: 400, occurrence: 3)])
        let clock = ContinuousClock()
        let first = clock.measure {
            pauses.pause(at: .pullApply)
            pauses.pause(at: .pullApply)
            pauses.pause(at: .pushBeforeAnswer)
        }
        #expect(first < .milliseconds(300))
        #expect(clock.measure { pauses.pause(at: .pullApply) } >= .milliseconds(400))
        #expect(clock.measure { pauses.pause(at: .pullApply) } < .milliseconds(300))
    }
}

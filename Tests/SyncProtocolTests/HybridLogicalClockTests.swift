import ContractRuntime
import Contracts
import SyncProtocol
import Testing

/// Hybrid logical clocks: the wire text, the order, and the monotonicity of `tick` and `receive`.
@Suite("HybridLogicalClock")
struct HybridLogicalClockTests {
    static func clock(_ milliseconds: Int64, _ counter: Int, _ node: String) -> HybridLogicalClock {
        HybridLogicalClock(milliseconds: milliseconds, counter: counter, node: node)
    }

    static func at(_ milliseconds: Int64) -> Timestamp { Timestamp(millisecondsSince1970: milliseconds) }

    // MARK: Text

    @Test("The wire text is 15-digit millis, 5-digit counter and the node, joined by dashes")
    func wireText() throws {
        #expect(Self.clock(1_769_846_400_123, 7, "device-7").description == "001769846400123-00007-device-7")
        #expect(Self.clock(0, 0, "n").description == "000000000000000-00000-n")
        #expect(Self.clock(999_999_999_999_999, 99_999, "z").description == "999999999999999-99999-z")
    }

    @Test(
        "The text parses back, keeping dashes in the node",
        arguments: [
            "001769846400123-00007-device-7", "000000000000000-00000-n", "999999999999999-99999-z",
            "001769846400123-00000-a-b-c", "001769846400123-00001--", "001769846400123-00001-東京",
        ])
    func textRoundTrip(_ text: String) throws {
        let clock = try #require(HybridLogicalClock(text))
        #expect(clock.description == text)
    }

    @Test("Parsing gives the three parts")
    func parsedParts() throws {
        let clock = try #require(HybridLogicalClock("001769846400123-00007-device-7"))
        #expect(clock == Self.clock(1_769_846_400_123, 7, "device-7"))
    }

    @Test(
        "Malformed text is refused",
        arguments: [
            "", "n", "1-2-n", "001769846400123-00007", "001769846400123-00007-", "00176984640012-00007-n",
            "0001769846400123-00007-n", "001769846400123-0007-n", "001769846400123-000007-n", "00176984640012x-00007-n",
            "001769846400123-0000x-n", "001769846400123_00007_n", " 01769846400123-00007-n", "-01769846400123-00007-n",
            "001769846400123--0007-n",
            // A combining mark after the second dash makes one character of them: no third part.
            "001769846400123-00001-\u{301}n",
        ])
    func malformedText(_ text: String) {
        #expect(HybridLogicalClock(text) == nil, "\(text)")
    }

    @Test("Random clocks round-trip through their text (seeded)")
    func randomTextRoundTrips() throws {
        var generator = SplitMix64(seed: 0x000C_10C4)
        for _ in 0..<2_000 {
            let clock = Self.randomClock(using: &generator)
            #expect(HybridLogicalClock(clock.description) == clock, "\(clock)")
        }
    }

    /// Signs are not digits: `Int64("+1")` accepts them, so the parser must look at the
    /// characters itself. Otherwise two different texts name the same clock, and `+` sorts
    /// before every digit, so the text order no longer matches the clock order.
    @Test("A sign in the millis or counter is refused")
    func signIsRefused() {
        #expect(HybridLogicalClock("+01769846400123-00007-n") == nil)
        #expect(HybridLogicalClock("001769846400123-+0007-n") == nil)
    }

    /// A counter past 99 999 has a 6-digit text that `init?(_:)` refuses, so a clock that
    /// `tick` or `receive` made can no longer travel (and its text no longer sorts).
    @Test("Every clock tick makes has a text that parses")
    func counterOverflowKeepsAWireForm() {
        let stalled = Self.clock(1_769_846_400_123, 99_999, "n")
        let next = stalled.tick(now: Self.at(1_769_846_400_000))
        #expect(next > stalled)
        #expect(HybridLogicalClock(next.description) == next, "\(next)")
    }

    // MARK: Order

    @Test("Milliseconds order first, whatever the counter and node")
    func millisecondsFirst() {
        #expect(Self.clock(1, 99_999, "z") < Self.clock(2, 0, "a"))
        #expect(!(Self.clock(2, 0, "a") < Self.clock(1, 99_999, "z")))
    }

    @Test("Within a millisecond the counter orders, whatever the node")
    func counterSecond() {
        #expect(Self.clock(5, 1, "z") < Self.clock(5, 2, "a"))
        #expect(!(Self.clock(5, 2, "a") < Self.clock(5, 1, "z")))
    }

    @Test("The node breaks ties, so two different writes never tie")
    func nodeBreaksTies() {
        let a = Self.clock(5, 3, "device-a"), b = Self.clock(5, 3, "device-b")
        #expect(a < b)
        #expect(!(b < a))
        #expect(a != b)
        #expect(!(a < a))
        #expect(a == Self.clock(5, 3, "device-a"))
    }

    @Test("The order is total and agrees with the byte order of the text (seeded)")
    func orderMatchesText() {
        var generator = SplitMix64(seed: 0x0000_0DE5)
        for _ in 0..<2_000 {
            // Share parts often, so the counter and node tie-breaks are exercised too.
            let a = Self.randomClock(using: &generator)
            var b = Self.randomClock(using: &generator)
            if Bool.random(using: &generator) { b.milliseconds = a.milliseconds }
            if Bool.random(using: &generator) { b.counter = a.counter }
            if Int.random(in: 0..<4, using: &generator) == 0 { b.node = a.node }

            let textOrder = a.description.utf8.lexicographicallyPrecedes(b.description.utf8)
            #expect((a < b) == textOrder, "\(a) vs \(b)")
            #expect([a < b, b < a, a == b].filter { $0 }.count == 1, "\(a) vs \(b)")
        }
    }

    // MARK: tick

    @Test("tick takes the wall clock when it is ahead, and resets the counter")
    func tickWithWallClockAhead() {
        let next = Self.clock(1_000, 4, "n").tick(now: Self.at(2_000))
        #expect(next == Self.clock(2_000, 0, "n"))
    }

    @Test("tick counts up when the wall clock stands still or goes back")
    func tickWithWallClockBehind() {
        let clock = Self.clock(1_000, 4, "n")
        #expect(clock.tick(now: Self.at(1_000)) == Self.clock(1_000, 5, "n"))
        #expect(clock.tick(now: Self.at(10)) == Self.clock(1_000, 5, "n"))
    }

    @Test("tick is strictly monotonic however the wall clock moves (seeded)", arguments: [1, 2, 3, 42, 0xBADC_0FFE])
    func tickIsMonotonic(_ seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        var wall: Int64 = 1_769_846_400_000
        var clock = Self.clock(0, 0, "device-\(seed)")
        for step in 0..<5_000 {
            wall += Int64.random(in: -50...50, using: &generator)  // jitter, jumps back, standing still
            let next = clock.tick(now: Self.at(wall))
            #expect(next > clock, "seed \(seed), step \(step): \(next) after \(clock)")
            #expect(next.milliseconds >= wall, "seed \(seed), step \(step): behind the wall clock")
            #expect(next.node == clock.node)
            clock = next
        }
    }

    // MARK: receive

    @Test("receive takes the latest of wall, local and remote")
    func receiveCases() {
        let local = Self.clock(1_000, 4, "local")
        // The wall clock is ahead of both.
        #expect(local.receive(Self.clock(1_500, 9, "remote"), now: Self.at(2_000)) == Self.clock(2_000, 0, "local"))
        // The remote is ahead: its millis, its counter + 1, our node.
        #expect(local.receive(Self.clock(3_000, 9, "remote"), now: Self.at(2_000)) == Self.clock(3_000, 10, "local"))
        // Local is ahead.
        #expect(local.receive(Self.clock(500, 9, "remote"), now: Self.at(600)) == Self.clock(1_000, 5, "local"))
        // Local and remote share the top millisecond: the larger counter + 1.
        #expect(local.receive(Self.clock(1_000, 9, "remote"), now: Self.at(900)) == Self.clock(1_000, 10, "local"))
        #expect(local.receive(Self.clock(1_000, 2, "remote"), now: Self.at(900)) == Self.clock(1_000, 5, "local"))
    }

    /// Nodes with skewed, jittering wall clocks exchange readings at random. Every reading a
    /// node makes is later than its previous one and later than every reading it has received,
    /// so the clock order respects causality.
    @Test("receive is later than both readings, and causality is kept (seeded)", arguments: [7, 11, 2024, 0xFEED])
    func receiveKeepsCausality(_ seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        let skews: [Int64] = [0, -40, 25, 900]
        var clocks = skews.indices.map { Self.clock(0, 0, "node-\($0)") }
        var wall: Int64 = 1_769_846_400_000
        for step in 0..<5_000 {
            wall += Int64.random(in: 0...3, using: &generator)
            let node = Int.random(in: 0..<clocks.count, using: &generator)
            let now = Self.at(wall + skews[node] + Int64.random(in: -5...5, using: &generator))
            let previous = clocks[node]
            if Bool.random(using: &generator) {
                clocks[node] = previous.tick(now: now)
            } else {
                let remote = clocks[Int.random(in: 0..<clocks.count, using: &generator)]
                clocks[node] = previous.receive(remote, now: now)
                #expect(clocks[node] > remote, "seed \(seed), step \(step): \(clocks[node]) not after \(remote)")
                #expect(clocks[node].milliseconds >= remote.milliseconds)
            }
            #expect(clocks[node] > previous, "seed \(seed), step \(step): \(clocks[node]) not after \(previous)")
            #expect(clocks[node].milliseconds >= now.millisecondsSince1970)
            #expect(clocks[node].node == previous.node, "a node's readings carry its own id")
        }
    }

    // MARK: Helpers

    static func randomClock(using generator: inout SplitMix64) -> HybridLogicalClock {
        let nodes = ["a", "b", "device-1", "device-10", "device-2", "ios-7F3A", "x-y-z"]
        return clock(
            Int64.random(in: 0...999_999_999_999_999, using: &generator), Int.random(in: 0...99_999, using: &generator),
            nodes.randomElement(using: &generator)!
        )
    }
}

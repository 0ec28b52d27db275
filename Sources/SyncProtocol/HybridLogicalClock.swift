public import ContractRuntime

/// A hybrid logical clock reading: wall-clock milliseconds, a counter for events within the
/// same millisecond (or when the wall clock is behind), and the node that made it. Ordered by
/// all three, so two different writes never tie: the node id is the deterministic tie-break.
///
/// Wire form: `<15-digit millis>-<5-digit counter>-<node>`, which also sorts as text.
public struct HybridLogicalClock: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var milliseconds: Int64
    public var counter: Int
    public var node: String

    public init(milliseconds: Int64, counter: Int, node: String) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.node = node
    }

    public init?(_ text: String) {
        let parts = text.split(separator: "-", maxSplits: 2, omittingEmptySubsequences: false)
        // Digits only: `Int("+1")` would accept a sign, and two texts would name one clock.
        func digits(_ part: Substring) -> Bool { part.utf8.allSatisfy { (48...57).contains($0) } }
        guard parts.count == 3, parts[0].count == 15, parts[1].count == 5, digits(parts[0]), digits(parts[1]),
            let milliseconds = Int64(parts[0]), let counter = Int(parts[1]), !parts[2].isEmpty
        else { return nil }
        self.init(milliseconds: milliseconds, counter: counter, node: String(parts[2]))
    }

    public var description: String {
        let millis = String(milliseconds), count = String(counter)
        return String(repeating: "0", count: max(0, 15 - millis.count)) + millis + "-"
            + String(repeating: "0", count: max(0, 5 - count.count)) + count + "-" + node
    }

    public static func < (lhs: HybridLogicalClock, rhs: HybridLogicalClock) -> Bool {
        (lhs.milliseconds, lhs.counter, lhs.node) < (rhs.milliseconds, rhs.counter, rhs.node)
    }

    /// The largest counter the five-digit wire form holds; past it the clock moves to the next millisecond.
    public static let maximumCounter = 99_999

    /// A reading with the counter kept within five digits (carrying into the milliseconds).
    private static func normalized(milliseconds: Int64, counter: Int, node: String) -> HybridLogicalClock {
        counter > maximumCounter
            ? HybridLogicalClock(milliseconds: milliseconds + 1, counter: 0, node: node)
            : HybridLogicalClock(milliseconds: milliseconds, counter: counter, node: node)
    }

    /// The next reading for a local event at wall time `now`.
    public func tick(now: Timestamp) -> HybridLogicalClock {
        if now.millisecondsSince1970 > milliseconds {
            return HybridLogicalClock(milliseconds: now.millisecondsSince1970, counter: 0, node: node)
        }
        return Self.normalized(milliseconds: milliseconds, counter: counter + 1, node: node)
    }

    /// The reading after receiving `remote` at wall time `now`.
    public func receive(_ remote: HybridLogicalClock, now: Timestamp) -> HybridLogicalClock {
        let wall = now.millisecondsSince1970
        let top = max(wall, milliseconds, remote.milliseconds)
        let counter: Int
        if top == milliseconds && top == remote.milliseconds {
            counter = max(self.counter, remote.counter) + 1
        } else if top == milliseconds {
            counter = self.counter + 1
        } else if top == remote.milliseconds {
            counter = remote.counter + 1
        } else {
            counter = 0
        }
        return Self.normalized(milliseconds: top, counter: counter, node: node)
    }
}

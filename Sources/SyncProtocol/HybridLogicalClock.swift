public import ContractRuntime

/// A hybrid logical clock reading: wall-clock milliseconds, a counter for events within the
/// same millisecond (or when the wall clock is behind), and the node that made it. Ordered by
/// all three, so two different writes never tie: the node id is the deterministic tie-break.
///
/// Wire form: `<15-digit millis>-<5-digit counter>-<node>`, which also sorts as text.
public struct HybridLogicalClock: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Wall-clock milliseconds since 1970.
    public var milliseconds: Int64
    /// Orders readings within the same millisecond.
    public var counter: Int
    /// The node that made the reading: the tie-break between devices.
    public var node: String

    /// A reading from its parts.
    public init(milliseconds: Int64, counter: Int, node: String) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.node = node
    }

    /// Parses the wire form; `nil` when the text is not one.
    public init?(_ text: String) {
        // Every mutation's clock is read several times on the server's path (checked, compared,
        // merged): its fixed-width head is read as bytes, not split into substrings.
        guard let head = text.utf8.withContiguousStorageIfAvailable(Self.head) ?? Self.head(of: Array(text.utf8)) else { return nil }
        let node = text.utf8.dropFirst(Self.headBytes)
        // A node that begins with a combining mark would join the `-` before it in one character:
        // the slow path reads it as text, as it always was.
        guard let first = node.first else { return nil }
        guard first < 0x80 else {
            let parts = text.split(separator: "-", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].utf8.count == 15, parts[1].utf8.count == 5, !parts[2].isEmpty else { return nil }
            self.init(milliseconds: head.milliseconds, counter: head.counter, node: String(parts[2]))
            return
        }
        self.init(milliseconds: head.milliseconds, counter: head.counter, node: String(Substring(node)))
    }

    /// `<15 digits>-<5 digits>-`: the bytes before the node.
    private static let headBytes = 22

    private static func head(of bytes: UnsafeBufferPointer<UInt8>) -> (milliseconds: Int64, counter: Int)? {
        guard bytes.count > headBytes, bytes[15] == UInt8(ascii: "-"), bytes[21] == UInt8(ascii: "-") else { return nil }
        var milliseconds: Int64 = 0
        for index in 0..<15 {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            milliseconds = milliseconds * 10 + Int64(digit)
        }
        var counter = 0
        for index in 16..<21 {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            counter = counter * 10 + Int(digit)
        }
        return (milliseconds, counter)
    }

    private static func head(of bytes: [UInt8]) -> (milliseconds: Int64, counter: Int)? {
        bytes.withUnsafeBufferPointer(head)
    }

    /// The wire form, which sorts as text the way readings compare.
    public var description: String {
        guard (0...999_999_999_999_999).contains(milliseconds), (0...Self.maximumCounter).contains(counter) else {
            let millis = String(milliseconds), count = String(counter)
            return String(repeating: "0", count: max(0, 15 - millis.count)) + millis + "-"
                + String(repeating: "0", count: max(0, 5 - count.count)) + count + "-" + node
        }
        var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: Self.headBytes)
        bytes.reserveCapacity(Self.headBytes + node.utf8.count)
        var value = milliseconds
        for index in stride(from: 14, through: 0, by: -1) {
            bytes[index] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
        }
        var count = counter
        for index in stride(from: 20, through: 16, by: -1) {
            bytes[index] = UInt8(ascii: "0") + UInt8(count % 10)
            count /= 10
        }
        bytes[15] = UInt8(ascii: "-")
        bytes[21] = UInt8(ascii: "-")
        bytes.append(contentsOf: node.utf8)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Orders readings by milliseconds, counter, then node.
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

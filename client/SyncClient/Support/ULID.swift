public import Foundation

/// A ULID: 48 bits of milliseconds since 1970 and 80 random bits, written as 26 characters of
/// Crockford base 32 (`01KG8Q3J0V7ZQ5Y3C9XW2D4M6N`). Text order is time order.
///
/// Outbox entries use one as their `client_mutation_id` (the server's idempotency key) and
/// events as their `event_id`.
public struct ULID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The top 64 bits: the 48-bit time and the first 16 random bits.
    public let high: UInt64
    /// The last 64 random bits.
    public let low: UInt64

    /// A ULID from its two 64-bit halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A ULID from its time and 80 bits of randomness (the top 16 bits of `randomHigh` are ignored).
    public init(milliseconds: UInt64, randomHigh: UInt16, randomLow: UInt64) {
        self.init(high: (milliseconds & 0xFFFF_FFFF_FFFF) << 16 | UInt64(randomHigh), low: randomLow)
    }

    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// Parses the 26-character text form (case-insensitive; `I`, `L` read as 1 and `O` as 0).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 26 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            guard let value = Self.decode(byte) else { return nil }
            // The first character carries only 3 bits (128 = 26 × 5 − 2).
            if index == 0, value > 7 { return nil }
            high = high << 5 | low >> 59
            low = low << 5 | UInt64(value)
        }
        self.init(high: high, low: low)
    }

    private static func decode(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0"), UInt8(ascii: "O"), UInt8(ascii: "o"): return 0
        case UInt8(ascii: "1"), UInt8(ascii: "I"), UInt8(ascii: "i"), UInt8(ascii: "L"), UInt8(ascii: "l"): return 1
        default:
            let upper = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte - 32 : byte
            guard let index = alphabet.firstIndex(of: upper) else { return nil }
            return UInt8(index)
        }
    }

    /// Milliseconds since 1970 when it was made.
    public var milliseconds: UInt64 { high >> 16 }

    /// When it was made.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// The 26-character text form.
    public var description: String {
        var characters = [UInt8](repeating: 0, count: 26)
        var high = self.high
        var low = self.low
        for index in stride(from: 25, through: 0, by: -1) {
            characters[index] = Self.alphabet[Int(low & 31)]
            low = low >> 5 | (high & 31) << 59
            high >>= 5
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// Orders ULIDs by time, then by their random bits.
    public static func < (lhs: ULID, rhs: ULID) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }
}

/// Makes ULIDs that are strictly increasing even within one millisecond (the random part of
/// the previous one plus one), or when the clock steps back.
///
/// ```swift
/// let ulids = ULIDGenerator(clock: ManualClock(), random: SeededRandomSource(seed: 1))
/// let id = ulids.next()   // ULID
/// ```
public final class ULIDGenerator: Sendable {
    private let clock: any DeviceClock
    private let random: any RandomSource
    private let last: Locked<ULID?>

    /// A generator reading time from `clock` and random bits from `random`.
    public init(clock: any DeviceClock = SystemClock(), random: any RandomSource = SystemRandomSource()) {
        self.clock = clock
        self.random = random
        self.last = Locked(nil)
    }

    /// The next ULID.
    public func next() -> ULID {
        let millis = UInt64(max(0, (clock.now().timeIntervalSince1970 * 1000).rounded(.down)))
        let fresh = ULID(milliseconds: millis, randomHigh: UInt16(truncatingIfNeeded: random.next()), randomLow: random.next())
        return last.withLock { last in
            var value = fresh
            if let previous = last, previous.milliseconds >= millis {
                // Same millisecond, or the clock went back: continue from the previous one.
                let (low, overflow) = previous.low.addingReportingOverflow(1)
                value = ULID(high: overflow ? previous.high + 1 : previous.high, low: low)
            }
            last = value
            return value
        }
    }

    /// The next ULID as text.
    public func nextString() -> String { next().description }
}

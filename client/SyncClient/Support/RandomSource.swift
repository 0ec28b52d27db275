import ContractRuntime
import Foundation

/// Where the store's randomness comes from (the random part of ULIDs; retry jitter in the sync
/// engine), injectable so tests are deterministic.
///
/// Keys and nonces never come from here: they always use the system's secure generator.
public protocol RandomSource: Sendable {
    /// 64 random bits.
    func next() -> UInt64
}

extension RandomSource {
    /// `count` random bytes.
    public func bytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            var word = next()
            for _ in 0..<min(8, count - bytes.count) {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return bytes
    }

    /// A uniformly distributed number in `0..<1`.
    public func unitInterval() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}

/// The system's cryptographically secure generator.
public struct SystemRandomSource: RandomSource {
    /// The system's generator.
    public init() {}

    /// 64 random bits from the system's generator.
    public func next() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }
}

/// A deterministic generator (SplitMix64) for tests: the same seed gives the same sequence.
public final class SeededRandomSource: RandomSource {
    private let generator: Locked<SplitMix64>

    /// A generator whose sequence `seed` determines.
    public init(seed: UInt64) {
        generator = Locked(SplitMix64(seed: seed))
    }

    /// The next 64 bits of the seeded sequence.
    public func next() -> UInt64 {
        generator.withLock { $0.next() }
    }
}

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
    public init() {}

    public func next() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }
}

/// A deterministic generator (SplitMix64) for tests: the same seed gives the same sequence.
public final class SeededRandomSource: RandomSource {
    private let state: Locked<UInt64>

    public init(seed: UInt64) {
        state = Locked(seed)
    }

    public func next() -> UInt64 {
        state.withLock { state in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}

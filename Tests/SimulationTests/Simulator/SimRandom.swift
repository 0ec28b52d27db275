import ContractRuntime
import Foundation

/// SplitMix64: a small, fast generator whose whole state is one number, so a schedule, a step
/// or a request can each carry its own seed and be replayed alone.
struct SimRandom: RandomNumberGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    /// A generator for one part of a run (`salt` names the part), independent of the others.
    init(seed: UInt64, salt: UInt64) {
        var mixer = SplitMix64(seed: seed ^ (salt &* 0x9E37_79B9_7F4A_7C15))
        generator = SplitMix64(seed: mixer.next())
    }

    mutating func next() -> UInt64 { generator.next() }

    /// A number in `0..<bound`.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }

    /// True with probability `percent` / 100.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// One element, or `nil` from an empty collection.
    mutating func pick<C: Collection>(_ elements: C) -> C.Element? where C.Index == Int {
        elements.isEmpty ? nil : elements[elements.startIndex + below(elements.count)]
    }
}

/// A value behind a lock, for the state the simulated transports share with the engine's tasks.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    var current: Value { withLock { $0 } }
}

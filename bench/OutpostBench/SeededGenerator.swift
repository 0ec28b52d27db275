import ContractRuntime

/// A small deterministic random source (SplitMix64). Every helper is written out here rather
/// than taken from the standard library, so the same seed gives the same contracts with any
/// Swift version on any platform.
struct SeededGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    mutating func next() -> UInt64 { generator.next() }

    /// A number in `range` (the tiny modulo bias does not matter here).
    mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// `true` with probability `percent` / 100.
    mutating func chance(_ percent: Int) -> Bool { int(in: 0...99) < percent }

    mutating func pick<T>(_ items: [T]) -> T {
        precondition(!items.isEmpty, "pick from an empty list")
        return items[int(in: 0...(items.count - 1))]
    }

    /// Picks by weight: `[(value, weight)]`.
    mutating func weighted<T>(_ items: [(T, Int)]) -> T {
        let total = items.reduce(0) { $0 + $1.1 }
        var roll = int(in: 0...(total - 1))
        for (value, weight) in items {
            if roll < weight { return value }
            roll -= weight
        }
        return items[items.count - 1].0
    }

    /// Fisher–Yates.
    mutating func shuffled<T>(_ items: [T]) -> [T] {
        var result = items
        guard result.count > 1 else { return result }
        for index in stride(from: result.count - 1, to: 0, by: -1) {
            result.swapAt(index, int(in: 0...index))
        }
        return result
    }
}

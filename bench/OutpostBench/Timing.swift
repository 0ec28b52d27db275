import Foundation

/// Wall-clock timing and the statistics the benchmarks report.
enum Timing {
    /// Runs `body` once and returns its result with the elapsed wall-clock seconds.
    static func measure<T>(_ body: () throws -> T) rethrows -> (value: T, seconds: Double) {
        let clock = ContinuousClock()
        let start = clock.now
        let value = try body()
        return (value, seconds(clock.now - start))
    }

    static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    /// User plus system CPU time of this process so far, every thread, in seconds.
    static func processCPUSeconds() -> Double {
        let usage = resourceUsage()
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// `getrusage(RUSAGE_SELF)`: this process's resource usage so far.
    static func resourceUsage() -> rusage {
        var usage = rusage()
        #if canImport(Glibc)
            getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
            getrusage(RUSAGE_SELF, &usage)
        #endif
        return usage
    }
}

/// The samples of one repeated measurement, in seconds.
struct Samples: Sendable {
    private(set) var values: [Double] = []

    mutating func append(_ seconds: Double) { values.append(seconds) }

    var count: Int { values.count }

    var median: Double {
        precondition(!values.isEmpty, "median of no samples")
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    var min: Double {
        precondition(!values.isEmpty, "min of no samples")
        return values.min()!
    }

    var max: Double {
        precondition(!values.isEmpty, "max of no samples")
        return values.max()!
    }

    /// The value below which `share` of the samples fall (nearest rank; 0.99 = p99).
    func percentile(_ share: Double) -> Double {
        precondition(!values.isEmpty, "percentile of no samples")
        let sorted = values.sorted()
        let rank = Int((share * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
    }
}

/// Number formatting for the tables (fixed, locale-independent).
enum Format {
    /// `0.2314` → `231.4 ms`, `0.0004` → `0.40 ms`, `1.5` → `1.500 s`.
    static func duration(_ seconds: Double) -> String {
        if seconds >= 1 { return fixed(seconds, 3) + " s" }
        let millis = seconds * 1000
        return fixed(millis, millis < 10 ? 2 : 1) + " ms"
    }

    /// `12.3456, 1` → `12.3`.
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let rounded = (abs(value) * scale).rounded()
        let whole = Int(rounded / scale)
        let fraction = Int(rounded - Double(whole) * scale)
        var text = (value < 0 && rounded > 0 ? "-" : "") + String(whole)
        if decimals > 0 {
            let digits = String(fraction)
            text += "." + String(repeating: "0", count: decimals - digits.count) + digits
        }
        return text
    }

    /// `123456` → `123.5 KiB`.
    static func bytes(_ count: Int) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1024 * 1024 { return fixed(Double(count) / 1024, 1) + " KiB" }
        return fixed(Double(count) / 1024 / 1024, 2) + " MiB"
    }

    /// `3.21` → `3.2×`.
    static func ratio(_ value: Double) -> String { fixed(value, value < 10 ? 2 : 1) + "×" }

    /// `23456.7` → `23 457/s`.
    static func rate(_ perSecond: Double) -> String { grouped(Int(perSecond.rounded())) + "/s" }

    /// `40000` → `40 000`.
    static func grouped(_ number: Int) -> String {
        let digits = Array(String(abs(number)))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(" ") }
            text.append(digit)
        }
        return (number < 0 ? "-" : "") + text
    }

    /// `0.7312` → `73.1 %`.
    static func percent(_ share: Double) -> String { fixed(share * 100, 1) + " %" }
}

import Foundation

/// A value behind a lock, for state shared by concurrent requests (metrics, rate buckets).
///
/// `Synchronization.Mutex` would do the same, but it needs macOS 15 and the package supports
/// macOS 14; `NSLock` is everywhere Foundation is.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

import Foundation

/// A value behind a lock, for the few pieces of mutable state the store keeps in memory.
///
/// `Synchronization.Mutex` needs iOS 18 / macOS 15; the package supports iOS 17, so this is
/// an `NSLock`.
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

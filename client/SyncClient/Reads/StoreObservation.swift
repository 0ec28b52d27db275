import ContractRuntime
import GRDB

/// The values of an observed read, as an `AsyncSequence`: the current value first, then one
/// per change. Errors are ``OfflineStoreError``s.
public struct StoreObservation<Value: Sendable>: AsyncSequence, Sendable {
    /// Each value the observed query gives.
    public typealias Element = Value

    let base: AsyncValueObservation<Value>

    /// Gives the observed values one after another.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncValueObservation<Value>.Iterator

        /// The next value, once the observed query gives one; `nil` when the observation ends.
        public mutating func next() async throws -> Value? {
            do {
                return try await base.next()
            } catch {
                throw OfflineStore.map(error)
            }
        }
    }

    /// An iterator over the observed values.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator())
    }
}

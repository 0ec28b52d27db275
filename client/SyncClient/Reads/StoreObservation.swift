import ContractRuntime
import GRDB

/// The values of an observed read, as an `AsyncSequence`: the current value first, then one
/// per change. Errors are ``OfflineStoreError``s.
public struct StoreObservation<Value: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Value

    let base: AsyncValueObservation<Value>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncValueObservation<Value>.Iterator

        public mutating func next() async throws -> Value? {
            do {
                return try await base.next()
            } catch {
                throw OfflineStore.map(error)
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator())
    }
}

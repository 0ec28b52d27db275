public import ContractRuntime
import GRDB

/// Reads, SQLite first. Each runs in its own snapshot; use ``read(_:)`` to combine several.
extension OfflineStore {
    /// Runs several reads against one consistent snapshot.
    public func read<Value>(_ body: (StoreReader) throws(OfflineStoreError) -> Value) throws(OfflineStoreError) -> Value {
        let codec = self.codec
        return try read { db throws in try body(StoreReader(db, codec: codec, contracts: contracts)) }
    }

    /// The rows of an entity matching `filter`, in `order` (primary-key order when empty).
    ///
    /// ```swift
    /// let open = try store.all(FieldTask.self, where: .equals(.status(.assigned)), orderBy: [.ascending("sort_index")])
    /// ```
    public func all<E: ContractEntity>(
        _ type: E.Type, where filter: RowFilter<E>? = nil, orderBy order: [RowOrder] = [], limit: Int? = nil
    ) throws(OfflineStoreError) -> [E] {
        try read { reader throws(OfflineStoreError) in try reader.all(E.self, where: filter, orderBy: order, limit: limit) }
    }

    /// The row with this primary key, or `nil`.
    public func fetch<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> E? {
        try read { reader throws(OfflineStoreError) in try reader.fetch(E.self, id: id) }
    }

    /// How many rows match `filter`.
    public func count<E: ContractEntity>(_ type: E.Type, where filter: RowFilter<E>? = nil) throws(OfflineStoreError) -> Int {
        try read { reader throws(OfflineStoreError) in try reader.count(E.self, where: filter) }
    }

    /// The client-only columns of a row, or `nil` when there is no such row.
    public func localState<E: LocalStateEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> E.LocalState? {
        try read { reader throws(OfflineStoreError) in try reader.localState(E.self, id: id) }
    }

    /// A row's sync metadata.
    public func syncInfo<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> RowSyncInfo? {
        try read { reader throws(OfflineStoreError) in try reader.syncInfo(E.self, id: id) }
    }

    // MARK: Observation

    /// The value of `fetch` now, then again every time a table it read changes (once per
    /// committed transaction). Ends with an error if a read fails, and when the store is closed.
    ///
    /// ```swift
    /// for try await tasks in store.observe({ try $0.tasks(teamId: "t-1") }) {
    ///     render(tasks)
    /// }
    /// ```
    public func observe<Value: Sendable>(
        _ fetch: @escaping @Sendable (StoreReader) throws -> Value
    ) -> StoreObservation<Value> {
        let codec = self.codec, contracts = self.contracts
        let observation = ValueObservation.tracking { db in try fetch(StoreReader(db, codec: codec, contracts: contracts)) }
        return StoreObservation(base: observation.values(in: pool))
    }

    /// Like ``observe(_:)``, but yields only values that differ from the previous one.
    public func observe<Value: Sendable & Equatable>(
        _ fetch: @escaping @Sendable (StoreReader) throws -> Value
    ) -> StoreObservation<Value> {
        let codec = self.codec, contracts = self.contracts
        let observation = ValueObservation.tracking { db in try fetch(StoreReader(db, codec: codec, contracts: contracts)) }.removeDuplicates()
        return StoreObservation(base: observation.values(in: pool))
    }

    /// The rows of an entity matching `filter`, now and after every change.
    public func observeAll<E: ContractEntity>(
        _ type: E.Type, where filter: RowFilter<E>? = nil, orderBy order: [RowOrder] = []
    ) -> StoreObservation<[E]> {
        observe { reader in try reader.all(E.self, where: filter, orderBy: order) }
    }
}

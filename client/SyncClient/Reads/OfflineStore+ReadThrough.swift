public import ContractRuntime
import SyncProtocol

extension OfflineStore {
    /// Reads from SQLite; when nothing is cached (`isCached` says false), fetches once with
    /// `fetcher`, stores the rows (one transaction) and reads again.
    ///
    /// ```swift
    /// switch try await store.readThrough(.row(Unit.self, id: id, including: ["lessons", "lessons.assets"]),
    ///                                    from: engine, read: { try $0.unitDetail(id: id) }, isCached: { $0 != nil }) {
    /// case .cached(let detail?), .fetched(let detail?): show(detail)
    /// case .offline: showNotAvailableOffline()
    /// default: showUnavailable()
    /// }
    /// ```
    ///
    /// - Throws: ``OfflineStoreError`` when SQLite fails; a failed fetch is a result, not an error.
    public func readThrough<Value: Sendable>(
        _ request: RemoteFetchRequest, from fetcher: any RemoteFetcher,
        read body: (StoreReader) throws(OfflineStoreError) -> Value, isCached: (Value) -> Bool
    ) async throws(OfflineStoreError) -> ReadResult<Value> {
        let local = try read(body)
        if isCached(local) {
            telemetry.count(.cacheHits)
            return .cached(local)
        }
        telemetry.count(.cacheMisses)
        let changes: ServerChanges
        do {
            changes = try await fetcher.fetch(request)
        } catch let failure as RemoteFetchFailure {
            return failure == .offline ? .offline : .unavailable(failure)
        } catch {
            return .unavailable(.invalidResponse(String(describing: error)))
        }
        do {
            try applyServerChanges(changes)
        } catch .invalidValue(let contract, let field, let reason) {
            return .unavailable(.invalidResponse("\(contract).\(field): \(reason)"))
        }
        let fetched = try read(body)
        return isCached(fetched) ? .fetched(fetched) : .unavailable(.notFound)
    }

    /// One row, from SQLite or else fetched once.
    public func fetch<E: ContractEntity>(
        _ type: E.Type, id: String, from fetcher: any RemoteFetcher
    ) async throws(OfflineStoreError) -> ReadResult<E> {
        let result = try await readThrough(
            .row(E.self, id: id), from: fetcher, read: { reader throws(OfflineStoreError) in try reader.fetch(E.self, id: id) },
            isCached: { $0 != nil }
        )
        return unwrap(result)
    }

    /// A row with the rows under it (its `has_many` relations, nested `depth` deep), from
    /// SQLite or else fetched once, all in one request; `read` builds the value from the store.
    ///
    /// ```swift
    /// let detail = try await store.fetch(Unit.self, id: id, withChildrenDepth: 2, from: engine) { reader throws(OfflineStoreError) in
    ///     try reader.unitDetail(id: id)
    /// }
    /// ```
    public func fetch<E: ContractEntity, Value: Sendable>(
        _ type: E.Type, id: String, withChildrenDepth depth: Int, from fetcher: any RemoteFetcher,
        read body: (StoreReader) throws(OfflineStoreError) -> Value?
    ) async throws(OfflineStoreError) -> ReadResult<Value> {
        let result = try await readThrough(
            .row(E.self, id: id, including: hasManyPaths(of: E.descriptor, depth: depth)), from: fetcher, read: body,
            isCached: { $0 != nil }
        )
        return unwrap(result)
    }

    /// The `has_many` relation paths of an entity, nested up to `depth` (`lessons`, `lessons.assets`).
    func hasManyPaths(of entity: EntityDescriptor, depth: Int) -> [String] {
        guard depth > 0 else { return [] }
        return entity.relations.filter { $0.kind == .hasMany }.flatMap { relation -> [String] in
            let nested = contracts.entity(named: relation.target).map { hasManyPaths(of: $0, depth: depth - 1) } ?? []
            return [relation.name] + nested.map { relation.name + "." + $0 }
        }
    }
}

/// `ReadResult<T?>` → `ReadResult<T>` (a `nil` value is neither cached nor fetched).
private func unwrap<T: Sendable>(_ result: ReadResult<T?>) -> ReadResult<T> {
    switch result {
    case .cached(let value): return value.map { .cached($0) } ?? .unavailable(.notFound)
    case .fetched(let value): return value.map { .fetched($0) } ?? .unavailable(.notFound)
    case .offline: return .offline
    case .unavailable(let failure): return .unavailable(failure)
    }
}

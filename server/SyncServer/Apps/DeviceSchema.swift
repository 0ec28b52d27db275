public import ContractRuntime
public import SyncProtocol

/// The schema versions a device runs (the `schema` parameter of its requests: contract name →
/// version), checked against the server's contracts, and the wire form of rows for those
/// versions: what an app's own route that serves rows needs so an older device receives the
/// fields its version knows, under the names it knows, as a pull does.
public struct DeviceSchema: Sendable {
    /// The versions the device declared; a contract it names nothing for is on the current version.
    public let versions: [String: Int]

    /// Checks `versions` against `contracts`.
    ///
    /// - Throws: ``ServiceError`` 426 `schema_too_old` when a version is below its contract's
    ///   `oldest_supported` (`details`: `entity`, `oldest_supported`, `current`). Names the
    ///   server does not know are ignored: a newer device may know contracts the server does not.
    public init(_ versions: [String: Int], contracts: ContractCatalog) throws(ServiceError) {
        try RowShaping.requireSupported(versions, contracts: contracts)
        self.versions = versions
    }

    /// The version the device runs for `entity`: the one it declared, or the current one when
    /// it declared none or a newer one.
    public func version(of entity: EntityDescriptor) -> Int {
        RowShaping.schemaVersion(of: entity.name, current: entity.currentVersion, in: versions)
    }

    /// The wire form of rows of `entity` for this device, worked out once for many rows.
    public func shape(of entity: EntityDescriptor) -> WireShape {
        let version = version(of: entity)
        return WireShape(version: version, plan: RowShaping.Plan(entity, version: version))
    }
}

/// The wire form of one entity's rows for one schema version (``DeviceSchema/shape(of:)``).
public struct WireShape: Sendable {
    /// The schema version rows are shaped for.
    public let version: Int
    let plan: RowShaping.Plan

    /// A stored row in wire form: the fields the version knows, under its names, and the
    /// server's row version (`_server_version`).
    public func wireFields(of row: StoredRow) -> [String: JSONValue] {
        plan.shape(row)
    }
}

extension SyncCursor {
    /// The cursor a request sent for `scopeKey` (the `since` of an app's own route that serves a
    /// scope page by page); `nil` when it sent none (an empty one is none).
    ///
    /// - Throws: ``ServiceError`` 400 `malformed_request` for a cursor this server did not issue,
    ///   of a format version it does not read, or of another scope.
    public static func requested(_ cursor: String?, scopeKey: String) throws(ServiceError) -> SyncCursor? {
        try PullService.position(of: cursor, scopeKey: scopeKey)
    }

    /// Refuses, with 410 `cursor_expired`, a cursor the scope's tombstone compaction passed
    /// since it was issued (``StorageSnapshot/compactedSequence(tenant:scopeKey:)``, read in the
    /// snapshot the page is read in): deletes after it may be gone, and the device must read the
    /// scope again from the start.
    public func requireWithinHorizon(compacted: Int64) throws(ServiceError) {
        try PullService.checkHorizon(self, compacted: compacted)
    }
}

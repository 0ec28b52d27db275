import ContractRuntime
import Foundation
import GRDB

/// The key versions a store is sealed with, as its `metadata` says.
struct StoredKeyVersions: Equatable {
    var current: Int
    /// The version a rotation under way rotates from.
    var previous: Int?

    static func read(_ db: Database) throws -> StoredKeyVersions {
        guard try db.tableExists("metadata") else { return StoredKeyVersions(current: 1, previous: nil) }
        return StoredKeyVersions(
            current: try Metadata.integer(db, .keyVersion).map(Int.init) ?? 1,
            previous: try Metadata.integer(db, .rotatingFromKeyVersion).map(Int.init)
        )
    }
}

/// Which version of the tenant key the store's values are sealed with (``OfflineStore/dataKeyStatus()``).
public struct DataKeyStatus: Hashable, Sendable {
    /// The key version new values are sealed with.
    public var version: Int
    /// While a rotation is under way (an app killed during ``OfflineStore/rotateDataKey(batchSize:)``
    /// and not opened since), the version it rotates from: still needed. `nil` otherwise.
    public var rotatingFrom: Int?
}

/// What a data key rotation did (``OfflineStore/rotateDataKey(batchSize:)``).
public struct KeyRotationReport: Hashable, Sendable {
    /// The key version the store was sealed with before: no longer needed once the rotation
    /// returns; the app may delete it (`KeyProvider.deleteKey(forTenant:version:)`).
    public var fromVersion: Int
    /// The key version everything is sealed with now.
    public var toVersion: Int
    /// Sealed values sealed again under the new version: encrypted fields, outbox entries
    /// (payload and HMAC), conflicts' recorded rows.
    public var resealedValues: Int
    /// Sealed values that opened under neither version (tampered before the rotation, or
    /// already unreadable): left as they were, and as unreadable as they were.
    public var unreadableValues: Int
    /// The write transactions the rotation took.
    public var batches: Int
}

extension OfflineStore {
    /// Rows a rotation re-seals per write transaction unless told otherwise.
    static let keyRotationBatchSize = 200

    /// The key version of the store's sealed values, and whether a rotation is under way.
    public func dataKeyStatus() -> DataKeyStatus {
        let ring = crypto.keyRing
        return DataKeyStatus(version: ring.current.version, rotatingFrom: ring.previous?.version)
    }

    /// Rotates the device's data key: asks the ``KeyProvider`` for the next version of the
    /// tenant key (`key(forTenant:version:)`), records it in the store, and seals again under it
    /// every encrypted field, every outbox entry (payload, HMAC, state MAC and the outbox's
    /// sealed head) and every recorded conflict, `batchSize` rows per write transaction.
    ///
    /// Reads and writes go on meanwhile, from any thread: a sealed value says which key version
    /// sealed it, and both versions open until the rotation ends; new values are sealed under
    /// the new version at once. When the app is killed part way, everything stays readable
    /// with one of the two versions, and the next open of the store finishes the rotation
    /// before it returns (so the app must not delete the old version before that).
    ///
    /// A rotation left unfinished is finished first, then a new one begins.
    ///
    /// - Returns: what was re-sealed; ``KeyRotationReport/fromVersion`` is no longer needed.
    /// - Throws: ``OfflineStoreError/keyUnavailable(tenantId:reason:)`` when the provider cannot
    ///   give the next version (a provider that predates versions), or any write error; the
    ///   store stays readable and a later call or open carries on.
    /// - Note: Other processes that have the same database open (an app extension) keep sealing
    ///   under the version they opened with: rotate when only this process has the store open.
    @discardableResult
    public func rotateDataKey(batchSize: Int = 200) throws(OfflineStoreError) -> KeyRotationReport {
        try rotateDataKey(batchSize: batchSize, stoppingAfterBatches: nil).report
    }

    /// ``rotateDataKey(batchSize:)``, calling `onBatch` after each committed batch with what the
    /// rotation did so far (to show progress; a kill after any call leaves the store as
    /// ``rotateDataKey(batchSize:)`` describes).
    public func rotateDataKey(batchSize: Int = 200, onBatch: (KeyRotationReport) -> Void) throws(OfflineStoreError) -> KeyRotationReport {
        try rotateDataKey(batchSize: batchSize, stoppingAfterBatches: nil, onBatch: onBatch).report
    }

    /// ``rotateDataKey(batchSize:)`` that stops (as a killed app would) after `stoppingAfterBatches`
    /// re-sealing transactions, for tests; `finished` says whether it ended the rotation.
    package func rotateDataKey(
        batchSize: Int, stoppingAfterBatches limit: Int?, onBatch: (KeyRotationReport) -> Void = { _ in }
    ) throws(OfflineStoreError) -> (report: KeyRotationReport, finished: Bool) {
        try ensureOpen()
        if crypto.keyRing.previous != nil { _ = try continueKeyRotation(batchSize: batchSize) }
        let previous = crypto.keyRing.current
        let next = StoreCrypto.VersionKeys(
            version: previous.version + 1, tenantKey: try Self.tenantKey(configuration, version: previous.version + 1)
        )
        do {
            try write { db in
                try Metadata.set(db, .rotatingFromKeyVersion, String(previous.version))
                try Metadata.set(db, .rotatingFromKeyCheck, previous.keyCheck)
                try Metadata.set(db, .keyVersion, String(next.version))
                try Metadata.set(db, .keyCheck, next.keyCheck)
                // From here on (this transaction's outbox seal included) everything is sealed
                // under the new version; the previous one still opens what is not yet.
                crypto.keyRing = StoreCrypto.KeyRing(current: next, previous: previous)
            }
        } catch {
            crypto.keyRing = StoreCrypto.KeyRing(current: previous, previous: nil)
            throw error
        }
        return try continueKeyRotation(batchSize: batchSize, stoppingAfterBatches: limit, onBatch: onBatch)
    }

    /// Seals again, batch after batch, what the rotation under way has not reached yet, and ends
    /// the rotation in the transaction that finds nothing left.
    func continueKeyRotation(
        batchSize: Int, stoppingAfterBatches limit: Int? = nil, onBatch: (KeyRotationReport) -> Void = { _ in }
    ) throws(OfflineStoreError) -> (report: KeyRotationReport, finished: Bool) {
        let ring = crypto.keyRing
        var report = KeyRotationReport(
            fromVersion: ring.previous?.version ?? ring.current.version, toVersion: ring.current.version, resealedValues: 0,
            unreadableValues: 0, batches: 0
        )
        guard ring.previous != nil else { return (report, true) }
        let targets = resealTargets()
        // Where each target's scan is (its key column's last value): rows before it are sealed
        // under the current version, as every write since the rotation began seals them.
        var positions: [DatabaseValue?] = Array(repeating: nil, count: targets.count)
        var exhausted = Array(repeating: false, count: targets.count)
        let header = StoreCrypto.header(version: ring.current.version)
        while true {
            if let limit, report.batches >= limit { return (report, false) }
            let finished = try write { db -> Bool in
                var budget = max(1, batchSize)
                for index in targets.indices where !exhausted[index] {
                    let step = try reseal(db, targets[index], header: header, after: positions[index], limit: budget)
                    report.resealedValues += step.resealed
                    report.unreadableValues += step.unreadable
                    positions[index] = step.last ?? positions[index]
                    budget -= step.rows
                    guard step.rows < step.limit else { return false }
                    exhausted[index] = true
                }
                try Metadata.remove(db, .rotatingFromKeyVersion)
                try Metadata.remove(db, .rotatingFromKeyCheck)
                return true
            }
            report.batches += 1
            onBatch(report)
            if finished {
                crypto.keyRing.previous = nil
                return (report, true)
            }
        }
    }

    /// A table holding sealed values.
    struct ResealTarget {
        enum Kind {
            /// A contract table's encrypted columns; the sealing context names the row by `id`.
            case fields(id: (Row) -> String)
            case outbox
            case conflicts
        }

        var table: String
        var keyColumn: String
        var sealedColumns: [String]
        var kind: Kind
    }

    func resealTargets() -> [ResealTarget] {
        var targets: [ResealTarget] = []
        for entity in contracts.entities {
            let columns = (entity.fields + entity.localFields).filter(\.isEncrypted).map(\.name)
            guard !columns.isEmpty else { continue }
            let codec = self.codec
            targets.append(
                ResealTarget(
                    table: entity.table, keyColumn: entity.primaryKey, sealedColumns: columns,
                    kind: .fields(id: { codec.key(of: $0, entity: entity) })
                )
            )
        }
        for event in contracts.events {
            let columns = event.fields.filter(\.isEncrypted).map(\.name)
            guard !columns.isEmpty else { continue }
            targets.append(
                ResealTarget(table: event.table, keyColumn: "event_id", sealedColumns: columns, kind: .fields(id: { $0["event_id"] ?? "" }))
            )
        }
        targets.append(ResealTarget(table: "outbox", keyColumn: "seq", sealedColumns: ["payload"], kind: .outbox))
        targets.append(ResealTarget(table: "conflicts", keyColumn: "id", sealedColumns: ["local_row", "server_row"], kind: .conflicts))
        return targets
    }

    /// Seals again under the current version up to `limit` rows of `target` after `position`
    /// whose sealed values do not start with `header`.
    private func reseal(
        _ db: Database, _ target: ResealTarget, header: Data, after position: DatabaseValue?, limit: Int
    ) throws -> (rows: Int, limit: Int, last: DatabaseValue?, resealed: Int, unreadable: Int) {
        let key = "\"\(target.keyColumn)\""
        let stale = target.sealedColumns.map { #"(typeof("\#($0)") = 'blob' AND substr("\#($0)", 1, \#(header.count)) <> ?)"# }
        var arguments: [(any DatabaseValueConvertible)?] = []
        var sql = "SELECT * FROM \"\(target.table)\" WHERE (\(stale.joined(separator: " OR ")))"
        arguments.append(contentsOf: target.sealedColumns.map { _ in header as (any DatabaseValueConvertible)? })
        if let position {
            sql += " AND \(key) > ?"
            arguments.append(position)
        }
        sql += " ORDER BY \(key) LIMIT ?"
        arguments.append(limit)
        let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments))
        var resealed = 0
        var unreadable = 0
        for row in rows {
            let keyValue: DatabaseValue = row[target.keyColumn] ?? .null
            switch target.kind {
            case .fields(let id):
                let rowId = id(row)
                var updates: [(column: String, value: Data)] = []
                for column in target.sealedColumns {
                    guard let sealed: Data = row[column], !sealed.starts(with: header) else { continue }
                    guard let plaintext = try? crypto.openField(sealed, table: target.table, column: column, id: rowId) else {
                        unreadable += 1
                        continue
                    }
                    updates.append((column, try crypto.sealField(plaintext, table: target.table, column: column, id: rowId)))
                }
                guard !updates.isEmpty else { continue }
                try db.execute(
                    sql: "UPDATE \"\(target.table)\" SET \(updates.map { "\"\($0.column)\" = ?" }.joined(separator: ", ")) WHERE \(key) = ?",
                    arguments: StatementArguments(updates.map { $0.value as (any DatabaseValueConvertible)? } + [keyValue])
                )
                resealed += updates.count
            case .outbox:
                // An entry whose HMAC or seal fails is left as it is: it is quarantined when
                // next read, as it would have been.
                guard var record = OutboxRecord(row: row), crypto.isValidMAC(record.hmac, for: record.macFields),
                    let plaintext = try? crypto.openRecord(record.payload, context: OutboxRecord.sealContext(record.clientMutationId))
                else {
                    unreadable += 1
                    continue
                }
                record.payload = try crypto.sealRecord(plaintext, context: OutboxRecord.sealContext(record.clientMutationId))
                // The state MAC, which covers this HMAC, is made again by the write's outbox seal.
                try db.execute(
                    sql: #"UPDATE "outbox" SET "payload" = ?, "hmac" = ? WHERE "seq" = ?"#,
                    arguments: [record.payload, crypto.mac(record.macFields), record.seq]
                )
                resealed += 1
            case .conflicts:
                let clientMutationId: String = row["client_mutation_id"] ?? ""
                var updates: [(column: String, value: Data)] = []
                for column in target.sealedColumns {
                    guard let sealed: Data = row[column], !sealed.starts(with: header) else { continue }
                    let context = Self.conflictContext(clientMutationId, column)
                    guard let plaintext = try? crypto.openRecord(sealed, context: context) else {
                        unreadable += 1
                        continue
                    }
                    updates.append((column, try crypto.sealRecord(plaintext, context: context)))
                }
                guard !updates.isEmpty else { continue }
                try db.execute(
                    sql: "UPDATE \"conflicts\" SET \(updates.map { "\"\($0.column)\" = ?" }.joined(separator: ", ")) WHERE \"id\" = ?",
                    arguments: StatementArguments(updates.map { $0.value as (any DatabaseValueConvertible)? } + [keyValue])
                )
                resealed += updates.count
            }
        }
        return (rows.count, limit, rows.last.map { $0[target.keyColumn] ?? .null }, resealed, unreadable)
    }
}

// MARK: - File protection

extension OfflineStore {
    /// Creates the (empty) database file with its protection class, so that SQLite never writes
    /// it unprotected; SQLite takes an empty file as a new database.
    static func createProtected(_ url: URL, _ protection: StoreFileProtection) throws(OfflineStoreError) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            let type = protection.fileProtectionType
            guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.protectionKey: type]) else {
                throw .cannotOpen(path: url.path, reason: "cannot create the file with its data protection class")
            }
        #endif
    }

    /// Gives the database and its `-wal` and `-shm` files the configured protection class (the
    /// configuration may have changed since they were created).
    static func protectFiles(_ url: URL, _ protection: StoreFileProtection) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            let type = protection.fileProtectionType
            for path in [url.path, url.path + "-wal", url.path + "-shm"] where FileManager.default.fileExists(atPath: path) {
                try? FileManager.default.setAttributes([.protectionKey: type], ofItemAtPath: path)
            }
        #endif
    }
}

#if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
    extension StoreFileProtection {
        var fileProtectionType: FileProtectionType {
            switch self {
            case .none: return FileProtectionType.none
            case .complete: return .complete
            case .completeUnlessOpen: return .completeUnlessOpen
            case .completeUntilFirstUserAuthentication: return .completeUntilFirstUserAuthentication
            }
        }
    }
#endif

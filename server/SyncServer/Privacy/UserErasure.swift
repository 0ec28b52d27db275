import ContractRuntime
import Foundation

/// Erases what the server holds about one user (a learner's right to erasure), in one write
/// transaction, so an erasure is either whole or not done at all:
///
/// - every row of every scope the user owns (a scope whose key the token's `{user_id}` fills,
///   such as `progress:user:{user_id}`) becomes a tombstone that keeps nothing but its primary
///   key, the columns of its unique keys and its sync metadata (devices reading the scope drop
///   the row); the rows that were already tombstones lose their columns the same way;
/// - the events filed in those scopes are deleted (events have no tombstones: nothing reads
///   them back but the user's own devices, which wipe their store);
/// - the stored push results of the user's push streams are deleted (a resend of one of their
///   `seq`s is answered `duplicate` and applies nothing);
/// - the user's audit details become unreadable (their key is destroyed), the chain's seals
///   untouched, so `audit verify` still holds;
/// - the user leaves every team, and the erasure is recorded: every token of the user issued
///   until now, or dated up to ``TokenSigner/issuedAtLeeway`` after it (an issuer's clock ahead
///   of the server's), is refused with `410 user_erased`, which tells the device to wipe its store;
/// - the user's file uploads under way and their grants go, and the files they uploaded that
///   no row names once the rows above are erased are deleted, their bytes after the commit;
/// - the erasure itself is audited (who asked, and how much was erased; no personal data).
///
/// What stays: the user's id where it names an actor (audit entries, the push streams'
/// owners, `_updated_by` of shared rows), and the records of shared scopes (a team's incidents
/// and the events a member filed there), which belong to the team.
public struct UserErasure: Sendable {
    let storage: any SyncStorage
    let clock: any ServerClock

    /// An erasure service on `storage`.
    public init(storage: any ServerStorage, clock: any ServerClock = SystemClock()) {
        self.storage = storage.engine
        self.clock = clock
    }

    /// What an erasure removed.
    public struct Report: Hashable, Sendable, Codable {
        /// The tenant of the user erased.
        public var tenant: String
        /// The user erased.
        public var userID: String
        /// The scope keys the user owned.
        public var scopes: [String]
        /// Rows turned into bare tombstones (live rows, and tombstones emptied).
        public var rowsErased: Int
        /// The user's events deleted.
        public var eventsDeleted: Int
        /// Stored push result records deleted (one per push).
        public var pushResultsDeleted: Int
        /// Audit entries whose details became unreadable.
        public var auditDetailsErased: Int
        /// Files the user uploaded that no row names any more, deleted with their bytes (files a
        /// team's rows still name stay, with the team's records).
        public var filesDeleted: Int = 0
        /// Seconds since 1970.
        public var erasedAt: Int64

        enum CodingKeys: String, CodingKey {
            case tenant, scopes
            case userID = "user_id"
            case rowsErased = "rows_erased"
            case eventsDeleted = "events_deleted"
            case pushResultsDeleted = "push_results_deleted"
            case auditDetailsErased = "audit_details_erased"
            case filesDeleted = "files_deleted"
            case erasedAt = "erased_at"
        }
    }

    /// Who asked for the erasure, as its audit entry names them.
    public struct Requester: Sendable {
        /// The user who asked.
        public var userID: String
        /// The device they asked from.
        public var deviceID: String

        /// A requester from the ids their token names.
        public init(userID: String, deviceID: String) {
            self.userID = userID
            self.deviceID = deviceID
        }

        /// The operator at the command line.
        public static let commandLine = Requester(userID: "operator", deviceID: "sync-server-cli")
    }

    /// Erases the user's data in `tenant`. Erasing a user twice erases what arrived since (a
    /// token issued after the first erasure may have written again) and is audited again.
    /// - Throws: ``ServiceError`` 400 for an empty tenant or user; 404 when the server holds
    ///   nothing of the user to erase (no team, row, event, push result or readable audit
    ///   detail, and no device or an erasure already recorded), and then nothing is recorded; a
    ///   storage failure as 500 (nothing erased).
    public func erase(tenant: String, userID: String, requestedBy requester: Requester) async throws(ServiceError) -> Report {
        guard !tenant.isEmpty, !userID.isEmpty else { throw .malformed("an erasure names a tenant and a user") }
        let now = clock.now()
        let contracts = storage.contracts
        let storage = self.storage
        let (report, uploads, files) = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction -> (Report, [String], [BlobKey]) in
                let devices = try await transaction.clients(tenant: tenant, ownedBy: userID).compactMap(\.owner?.deviceID)
                let scopes = Self.ownedScopes(tenant: tenant, userID: userID, devices: devices, contracts: contracts)
                var report = Report(
                    tenant: tenant, userID: userID, scopes: scopes.map(\.key), rowsErased: 0, eventsDeleted: 0, pushResultsDeleted: 0,
                    auditDetailsErased: 0, erasedAt: now.millisecondsSince1970 / 1000
                )
                for (scope, key) in scopes {
                    try await transaction.lockScope(tenant: tenant, scopeKey: key)
                    for entity in contracts.entities where entity.scope == scope.name {
                        report.rowsErased += try await Self.erase(entity, tenant: tenant, scopeKey: key, now: now, in: transaction)
                    }
                    for event in contracts.events where event.scope == scope.name {
                        let table = ContractTable(event)
                        for row in try await Self.rows(of: table, scopeKey: key, tenant: tenant, in: transaction) {
                            guard let id = row.text(table.primaryKey) else { continue }
                            try await transaction.deleteRow(in: table, tenant: tenant, id: id)
                            report.eventsDeleted += 1
                        }
                    }
                }
                report.pushResultsDeleted = try await transaction.deletePushResults(tenant: tenant, ownedBy: userID)
                report.auditDetailsErased = try await transaction.eraseAuditDetails(tenant: tenant, userID: userID)
                // What the fleet census knew of the user's devices (app versions, syncs, telemetry).
                _ = try await transaction.serverTableQuery(
                    "DELETE FROM device_census WHERE tenant = ? AND user_id = ? RETURNING device_id", [.text(tenant), .text(userID)])
                // The user's devices' public keys: a re-enrolled device registers again.
                _ = try await DeviceKeyStore.deleteKeys(tenant: tenant, userID: userID, in: transaction)
                let (uploads, files) = try await Self.eraseFiles(tenant: tenant, userID: userID, in: transaction)
                report.filesDeleted = files.count
                let held = try await transaction.identityState(tenant: tenant, userID: userID, deviceID: "")
                let erasedNothing =
                    report.rowsErased + report.eventsDeleted + report.pushResultsDeleted + report.auditDetailsErased + report.filesDeleted == 0
                if erasedNothing, held.teams.isEmpty, devices.isEmpty || held.erasedAt != nil {
                    // Nothing of the name is held (a typo, another tenant's user), or nothing
                    // arrived since its erasure: say so, and record nothing, rather than report
                    // it erased. A user with devices and no data yet is still erased: their
                    // tokens are refused from then on.
                    throw ServiceError.notFound("the server holds nothing of user '\(userID)' in tenant \(tenant) to erase")
                }
                try await transaction.recordErasure(tenant: tenant, userID: userID, at: report.erasedAt)
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: tenant, recordedAt: now.millisecondsSince1970, userID: requester.userID, deviceID: requester.deviceID,
                        entity: "User", rowID: userID, operation: .erase, outcome: .erased,
                        detail: CanonicalJSON.text(Self.auditDetail(report))
                    )
                )
                return (report, uploads, files)
            }
        }
        // The bytes once the records are gone: a failure here leaves bytes no record names,
        // never a record whose bytes are gone.
        let blobs = storage.defaultBlobStore
        for upload in uploads { try? await blobs.discard(upload: upload) }
        for file in files { try? await blobs.delete(file) }
        return report
    }

    /// Deletes the user's uploads under way, their grants, and the files they uploaded that no
    /// row names; the uploads' ids and the files' keys, whose bytes go after the commit.
    static func eraseFiles(tenant: String, userID: String, in transaction: any StorageTransaction) async throws -> ([String], [BlobKey]) {
        typealias Table = EngineNames.ServerTable
        let uploads = try await transaction.serverTableQuery(
            "DELETE FROM \"\(Table.fileUploads.rawValue)\" WHERE \"tenant\" = ? AND \"user_id\" = ? RETURNING \"id\"", [.text(tenant), .text(userID)]
        ).compactMap { $0.text("id") }
        _ = try await transaction.serverTableQuery(
            "DELETE FROM \"\(Table.fileGrants.rawValue)\" WHERE \"tenant\" = ? AND \"user_id\" = ? RETURNING \"sha256\"",
            [.text(tenant), .text(userID)])
        let files = try await transaction.serverTableQuery(
            """
            DELETE FROM "\(Table.files.rawValue)" WHERE "tenant" = ? AND "uploaded_by" = ? AND NOT EXISTS (
                SELECT 1 FROM "\(Table.fileReferences.rawValue)" r WHERE r."tenant" = "\(Table.files.rawValue)"."tenant" AND r."sha256" = "\(Table.files.rawValue)"."sha256")
            RETURNING "sha256"
            """, [.text(tenant), .text(userID)]
        ).compactMap { $0.text("sha256").map { BlobKey(tenant: tenant, sha256: $0) } }
        return (uploads, files)
    }

    /// The scopes a user owns: those whose key the identity alone fills and that name the user
    /// (one key per device of theirs when the key also names the device).
    static func ownedScopes(
        tenant: String, userID: String, devices: [String], contracts: ContractCatalog
    ) -> [(scope: ScopeDescriptor, key: String)] {
        let tokenFilled: Set<String> = [ScopePlaceholder.tenantID.rawValue, ScopePlaceholder.userID.rawValue, ScopePlaceholder.deviceID.rawValue]
        var owned: [(ScopeDescriptor, String)] = []
        for scope in contracts.scopes {
            let placeholders = Set(scope.placeholders)
            guard placeholders.contains(ScopePlaceholder.userID.rawValue), placeholders.isSubset(of: tokenFilled) else { continue }
            let values = placeholders.contains(ScopePlaceholder.deviceID.rawValue) ? Set(devices).sorted() : [""]
            for device in values {
                let fill = [
                    ScopePlaceholder.tenantID.rawValue: tenant, ScopePlaceholder.userID.rawValue: userID,
                    ScopePlaceholder.deviceID.rawValue: device,
                ]
                if let key = scope.key(fill) { owned.append((scope, key)) }
            }
        }
        return owned
    }

    /// Turns every row of one entity in a scope into a bare tombstone; returns how many changed.
    private static func erase(_ entity: EntityDescriptor, tenant: String, scopeKey: String, now: Timestamp, in transaction: any StorageTransaction)
        async throws -> Int
    {
        let table = ContractTable(entity)
        let kept = Set(entity.indexes.filter(\.isUnique).flatMap(\.fields) + [entity.primaryKey])
        var erased = 0
        for existing in try await rows(of: table, scopeKey: scopeKey, tenant: tenant, in: transaction) {
            var row = existing
            for field in entity.fields + entity.serverOnlyFields where !kept.contains(field.name) {
                row[field.name] = field.isOptional ? .null : emptyValue(of: field)
            }
            row["_field_clocks"] = .null
            row["_hlc"] = .null
            // A bare tombstone already (an earlier erasure): nothing to erase.
            if existing.integer("_deleted") == 1, row == existing { continue }
            if existing.integer("_deleted") != 1 {
                // A new change of the scope: devices still reading it drop the row.
                row["_deleted"] = .integer(1)
                row["_version"] = .integer((existing.integer("_version") ?? 0) + 1)
                row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: tenant, scopeKey: scopeKey))
                row["_updated_at"] = .integer(now.millisecondsSince1970)
                row["_updated_by"] = .text("erasure")
            }
            try await transaction.upsert(row, in: table)
            erased += 1
        }
        return erased
    }

    /// Every row of a table in a scope, tombstones included, by primary key.
    static func rows(of table: ContractTable, scopeKey: String, tenant: String, in reader: any StorageReader) async throws -> [StoredRow] {
        try await reader.rows(in: table, tenant: tenant, where: ["_scope_key": .text(scopeKey)], limit: Int(Int32.max))
    }

    /// The value a required column keeps once its content is gone: the empty value of its
    /// type, stored as the codec stores it.
    static func emptyValue(of field: FieldDescriptor) -> ColumnValue {
        let candidates: [JSONValue]
        switch field.kind {
        case .int: candidates = [.int(0)]
        case .timestamp: candidates = [.string("1970-01-01T00:00:00Z"), .int(0)]
        case .double: candidates = [.double(0)]
        case .bool: candidates = [.bool(false)]
        case .bytes: candidates = [.string("")]
        case .file:
            // An empty file of a type the field accepts: the erased row names no bytes of the user's.
            candidates = (field.contentTypes.filter { !$0.hasSuffix("*") } + ["application/octet-stream"]).map { type in
                .object(["sha256": .string(FileReference.emptySHA256), "size": .int(0), "content_type": .string(type)])
            }
        case .json: candidates = [.object([:])]
        case .list: candidates = [.array([])]
        case .enumeration(let values, let fallback): candidates = [.string(fallback ?? values.first ?? "")]
        case .date: candidates = [.string("1970-01-01")]
        case .uuid: candidates = [.string("00000000-0000-0000-0000-000000000000")]
        case .id, .string, .ref: candidates = [.string("")]
        }
        return candidates.lazy.compactMap { try? RowCodec.columnValue($0, for: field) }.first ?? .null
    }

    static func auditDetail(_ report: Report) -> JSONValue {
        .object([
            "scopes": .array(report.scopes.map(JSONValue.string)), "rows_erased": .int(Int64(report.rowsErased)),
            "events_deleted": .int(Int64(report.eventsDeleted)), "push_results_deleted": .int(Int64(report.pushResultsDeleted)),
            "audit_details_erased": .int(Int64(report.auditDetailsErased)), "files_deleted": .int(Int64(report.filesDeleted)),
        ])
    }
}

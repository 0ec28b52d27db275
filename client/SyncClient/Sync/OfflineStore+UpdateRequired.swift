import ContractRuntime
import Foundation
import GRDB

/// Contracts the server refused with a 426 ("update required").
///
/// Such a contract is *held*: its outbox entries stay unsent (never discarded), its rows are
/// neither pushed nor pulled, and it leaves the `schema` this device sends, so that every other
/// contract keeps syncing. Opening the store with a build whose version of the contract is
/// supported again lifts the hold and pulls every scope again from the start, so the rows the
/// server held back in the meantime arrive.
extension OfflineStore {
    /// The contracts held until the app is updated, by name.
    public func updateRequirements() throws(OfflineStoreError) -> [UpdateRequired] {
        try read { db in try Self.heldContracts(db) }
    }

    /// Holds `requirement.entity` after a 426. When the server said which seq it applied last,
    /// the refused seqs above it are released so the other contracts' entries are numbered again
    /// without the held ones.
    ///
    /// - Throws: ``OfflineStoreError/invalidValue(contract:field:reason:)`` when the 426 names
    ///   no contract this build knows (nothing can be held then; the engine reports the refusal).
    package func holdForUpdate(_ requirement: UpdateRequired, serverLastSeq: Int64?) throws(OfflineStoreError) {
        guard let name = requirement.entity, schemaVersions[name] != nil else {
            throw .invalidValue(
                contract: requirement.entity ?? "?", field: "*", reason: "the server asked for an update without naming a known contract"
            )
        }
        try write { db in
            var held = try Self.heldContracts(db).filter { $0.entity != name }
            held.append(requirement)
            try Self.saveHeld(db, held)
            if let serverLastSeq { try Self.releasePushSequence(db, above: serverLastSeq) }
        }
    }

    /// This build's contract versions without the held ones: the `schema` of a push or pull.
    package func requestSchemaVersions() throws(OfflineStoreError) -> [String: Int] {
        let held = try read { db in try Self.heldContractNames(db) }
        return schemaVersions.filter { !held.contains($0.key) }
    }

    // MARK: Internals

    static func heldContracts(_ db: Database) throws -> [UpdateRequired] {
        guard let text = try Metadata.get(db, .updateRequired) else { return [] }
        return try JSONDecoder().decode([UpdateRequired].self, from: Data(text.utf8))
    }

    static func heldContractNames(_ db: Database) throws -> Set<String> {
        Set(try heldContracts(db).compactMap(\.entity))
    }

    private static func saveHeld(_ db: Database, _ held: [UpdateRequired]) throws {
        if held.isEmpty {
            try Metadata.remove(db, .updateRequired)
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let sorted = held.sorted { ($0.entity ?? "") < ($1.entity ?? "") }
        try Metadata.set(db, .updateRequired, String(decoding: try encoder.encode(sorted), as: UTF8.self))
    }

    /// Seqs above the server's last were never taken: they are numbered again at the next push.
    static func releasePushSequence(_ db: Database, above serverLastSeq: Int64) throws {
        try db.execute(
            sql: """
                UPDATE "outbox" SET "push_seq" = NULL, "status" = CASE "status" WHEN \(OutboxStatus.sending.sql) THEN \(OutboxStatus.pending.sql) ELSE "status" END
                WHERE "push_seq" > ? AND "status" IN \(OutboxStatus.sql(OutboxStatus.renumberable))
                """,
            arguments: [serverLastSeq]
        )
        try Metadata.set(db, .lastPushSeq, String(serverLastSeq))
    }

    /// At open: lifts the holds this build satisfies (an app update) and restarts every scope's
    /// cursor, since pulls skipped the held contracts' rows. Returns the lifted contracts.
    @discardableResult
    static func liftSatisfiedHolds(_ db: Database, contracts: ContractCatalog) throws -> [String] {
        let held = try heldContracts(db)
        guard !held.isEmpty else { return [] }
        var lifted: [String] = []
        let kept = held.filter { requirement in
            guard let name = requirement.entity, let version = contracts.currentVersions[name] else { return true }
            let satisfied = version >= (requirement.oldestSupported ?? Int.max)
            if satisfied { lifted.append(name) }
            return !satisfied
        }
        guard !lifted.isEmpty else { return [] }
        try saveHeld(db, kept)
        try db.cachedStatement(sql: #"UPDATE "sync_state" SET "cursor" = NULL"#).execute()
        return lifted
    }
}

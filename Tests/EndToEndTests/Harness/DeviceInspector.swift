import ContractRuntime
import Contracts
import Foundation
import GRDB
import LearningClient
import SyncClient

/// Reads a device's store while no `sync-device` runs on it: what a crash left behind, and what
/// the device holds to compare with the server. Opened through the library, as the device's next
/// run would open it (SQLite recovers the killed process's WAL first).
final class DeviceInspector {
    let store: OfflineStore
    private let database: DatabaseQueue

    init(_ device: Device) throws {
        let profile = try device.profile()
        guard let tenant = profile["tenant"].string, let user = profile["user"].string, let id = profile["device"].string else {
            throw Device.Unexpected(description: "\(device.name): device.json names no tenant, user or device")
        }
        let databaseURL = device.home.appendingPathComponent("outpost.sqlite")
        store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: databaseURL, tenantId: tenant, userId: user, deviceId: id,
                keyProvider: FileKeyProvider(directory: device.home.appendingPathComponent("keys", isDirectory: true))
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
        var readOnly = Configuration()
        readOnly.readonly = true
        database = try DatabaseQueue(path: databaseURL.path, configuration: readOnly)
    }

    /// Opens the device's store, runs `body`, and closes it before the device runs again.
    static func read<T>(_ device: Device, _ body: (DeviceInspector) throws -> T) throws -> T {
        let inspector = try DeviceInspector(device)
        defer { inspector.close() }
        return try body(inspector)
    }

    func close() {
        try? store.close()
        try? database.close()
    }

    /// The entity rows of one scope key (`ops:team:team-1`) in wire form, each with the server
    /// version it is based on (`_server_version`, as pulls carry it).
    func contents(ofScope key: String) throws -> ScopeContents {
        let scope = try Self.scope(ofKey: key)
        var rows: [String: [String: [String: JSONValue]]] = [:]
        for entity in ContractRegistry.entities where entity.scope == scope.name {
            let versions = try database.read { db in
                try Row.fetchAll(
                    db,
                    sql: "SELECT \(entity.primaryKey.quotedDatabaseIdentifier) AS id, \"_server_version\" AS version "
                        + "FROM \(entity.table.quotedDatabaseIdentifier)"
                ).map { (id: $0["id"] as String, version: $0["version"] as Int64?) }
            }
            for (id, version) in versions {
                guard var row = try store.read({ (reader) throws(OfflineStoreError) in try reader.wireRow(entity.name, id: id) }) else {
                    continue
                }
                row["_server_version"] = version.map(JSONValue.int)
                rows[entity.name, default: [:]][id] = ScopeContents.withoutNulls(row)
            }
        }
        return ScopeContents(rows: rows)
    }

    /// The stored cursor of a scope key.
    func cursor(ofScope key: String) throws -> String? {
        try store.cursor(forScope: key)
    }

    /// The outbox, delivered entries included.
    func outbox() throws -> [OutboxEntry] {
        try store.outboxEntries()
    }

    /// The scope whose key template `key` fills.
    static func scope(ofKey key: String) throws -> ScopeDescriptor {
        let scope = ContractRegistry.scopes.first { scope in
            let literal = scope.keyTemplate.split(separator: "{", maxSplits: 1).first.map(String.init) ?? scope.keyTemplate
            return scope.placeholders.isEmpty ? key == scope.keyTemplate : key.hasPrefix(literal)
        }
        guard let scope else { throw Device.Unexpected(description: "no scope of the manifest has keys like '\(key)'") }
        return scope
    }
}

/// A running device's outbox, read over a second connection while the device writes (WAL lets
/// readers work beside the one writer): to aim a kill at its push phase.
final class OutboxWatch {
    private let database: DatabaseQueue

    /// What the outbox holds at one moment.
    struct Counts {
        var sending: Int
        var done: Int
    }

    init(_ device: Device) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabaseQueue(path: device.home.appendingPathComponent("outpost.sqlite").path, configuration: configuration)
    }

    func counts() throws -> Counts {
        try database.read { db in
            Counts(
                sending: try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "outbox" WHERE "status" = 'sending'"#) ?? 0,
                done: try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "outbox" WHERE "status" = 'done'"#) ?? 0
            )
        }
    }
}

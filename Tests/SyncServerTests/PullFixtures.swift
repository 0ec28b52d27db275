import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// A clock tests move by hand.
final class PullTestClock: ServerClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Int64

    init(_ start: Int64 = 1_769_846_400_000) {  // 2026-01-31T08:00:00.000Z
        current = start
    }

    func now() -> Timestamp {
        lock.lock()
        defer { lock.unlock() }
        current += 1000
        return Timestamp(millisecondsSince1970: current)
    }
}

/// A fresh storage of a kind and an asset store in a temporary folder, with the services on top.
struct PullHarness {
    let folder: URL
    let storage: any SyncStorage
    let clock = PullTestClock()
    let pull: PullService
    /// The sample apps' content operations (units, assets, learning routes); the sample suites'.
    let content: SampleContentService
    /// The engine's publishing behind ``publish(_:_:as:)``: with the sample apps' computed fields
    /// on the sample's contracts, with none on the engines' own (``engine(_:defaultLimit:maximumLimit:)``).
    let publisher: ContentService

    static let tenant = "acme"
    static let admin = DeviceIdentity(tenant: tenant, userID: "editor", deviceID: "console", isAdmin: true, expiresAt: 4_000_000_000)

    /// A harness on a fresh storage of `contracts`, publishing with `apps`' computed fields.
    init(
        _ kind: StorageKind, defaultLimit: Int = 500, maximumLimit: Int = 1000, contracts: any ContractSchema.Type = ContractRegistry.self,
        apps: [any ServerApp] = SampleServerApps.all
    ) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-pull-\(UUID().uuidString)")
        storage = try await kind.makeStorage(in: folder.appendingPathComponent("db"), contracts: contracts)
        pull = PullService(storage: storage, defaultLimit: defaultLimit, maximumLimit: maximumLimit)
        content = SampleContentService(storage: storage, clock: clock)
        publisher = ContentService(storage: storage, clock: clock, apps: apps)
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }

    /// A harness on a storage opened already (one of several processes' on one database).
    private init(storage: any SyncStorage, folder: URL) {
        self.folder = folder
        self.storage = storage
        pull = PullService(storage: storage)
        content = SampleContentService(storage: storage, clock: clock)
        publisher = ContentService(storage: storage, clock: clock, apps: SampleServerApps.all)
    }

    static func sharing(_ storage: any SyncStorage, folder: URL) async throws -> PullHarness {
        PullHarness(storage: storage, folder: folder)
    }

    static func device(_ user: String = "u-1", tenant: String = tenant, teams: [String] = ["t-1"]) -> DeviceIdentity {
        DeviceIdentity(tenant: tenant, userID: user, deviceID: "dev-\(user)", teams: teams, expiresAt: 4_000_000_000)
    }

    static func unit(_ id: String, title: String? = nil, sortIndex: Int64 = 0, minutes: Int64? = 10) -> JSONValue {
        var row: [String: JSONValue] = [
            "id": .string(id), "title": .string(title ?? "Unit \(id)"), "description": .string("About \(id)"),
            "learner_level": .string("beginner"), "sort_index": .int(sortIndex), "tags": .array([.string("sample")]),
        ]
        if let minutes { row["estimated_minutes"] = .int(minutes) }
        return .object(row)
    }

    static func lesson(_ id: String, unit: String, index: Int64, seconds: Int64? = 60) -> JSONValue {
        var row: [String: JSONValue] = [
            "id": .string(id), "unit_id": .string(unit), "title": .string("Lesson \(id)"), "sort_index": .int(index),
            "lesson_kind": .string("reading"),
        ]
        if let seconds { row["duration_seconds"] = .int(seconds) }
        return .object(row)
    }

    @discardableResult
    func publish(_ entity: String, _ row: JSONValue, as identity: DeviceIdentity = admin) async throws -> JSONValue {
        try await publisher.publish(entity: entity, row: row, identity: identity)
    }

    /// Every page of a scope from the start, with the cursor of each.
    func pullAll(
        _ scope: String, as identity: DeviceIdentity, limit: Int? = nil, schema: [String: Int] = [:], from cursor: String? = nil
    ) async throws -> [PullResponse] {
        var pages: [PullResponse] = []
        var cursor = cursor
        repeat {
            let page = try await pull.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: nil, identity: identity)
            pages.append(page)
            cursor = page.cursor
        } while pages.last!.hasMore && pages.count < 10_000
        return pages
    }

    /// Writes a row straight into storage, as push would, with the scope's next sequence.
    func storeDirectly(_ entity: EntityDescriptor, _ fields: [String: JSONValue], scopeKey: String, tenant: String = tenant, deleted: Bool = false)
        async throws
    {
        try await storage.write { transaction in
            var row = StoredRow()
            for field in entity.fields {
                let value = fields[field.name] ?? field.defaultValue ?? .null
                row[field.name] = try RowCodec.columnValue(value, for: field)
            }
            let existing = try await transaction.row(
                in: ContractTable(entity), tenant: tenant,
                id: fields[entity.primaryKey].flatMap {
                    if case .string(let id) = $0 { return id } else { return nil }
                } ?? "")
            row["_tenant_id"] = .text(tenant)
            row["_scope_key"] = .text(scopeKey)
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: tenant, scopeKey: scopeKey))
            row["_version"] = .integer((existing?.integer("_version") ?? 0) + 1)
            row["_schema_version"] = .integer(Int64(entity.currentVersion))
            row["_deleted"] = .integer(deleted ? 1 : 0)
            row["_updated_at"] = .integer(1_769_846_400_000)
            row["_updated_by"] = .text("test")
            try await transaction.upsert(row, in: ContractTable(entity))
        }
    }
}

extension PullHarness {
    /// Writes an event envelope recorded by user `u-2`'s device straight into storage, with the
    /// scope's next sequence.
    func storeEvent(_ event: EventDescriptor, id: String, scopeKey: String, payload: [String: ColumnValue]) async throws {
        try await storage.write { transaction in
            var row = StoredRow(payload)
            row["_tenant_id"] = .text(PullHarness.tenant)
            row["event_id"] = .text(id)
            row["schema_version"] = .integer(1)
            row["user_id"] = .text("u-2")
            row["device_id"] = .text("dev-u-2")
            row["occurred_at"] = .integer(1_769_846_400_000)
            row["recorded_at"] = .integer(1_769_846_401_000)
            row["hash"] = .text(String(repeating: "a", count: 64))
            row["_scope_key"] = .text(scopeKey)
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: PullHarness.tenant, scopeKey: scopeKey))
            _ = try await transaction.insertIfAbsent(row, in: ContractTable(event))
        }
    }
}

/// The HTTP status of the ``ServiceError`` a call throws; `nil` when it succeeds.
func pullErrorStatus(_ work: () async throws -> Void) async -> Int? {
    do {
        try await work()
        return nil
    } catch let error as ServiceError {
        return error.status
    } catch {
        Issue.record("expected a ServiceError, got \(error)")
        return -1
    }
}

/// The ``ServiceError`` a call throws.
func pullError(_ work: () async throws -> Void) async -> ServiceError? {
    do {
        try await work()
        return nil
    } catch {
        return error as? ServiceError
    }
}

extension JSONValue {
    /// The member of an object.
    func pullMember(_ name: String) -> JSONValue? {
        if case .object(let members) = self { return members[name] }
        return nil
    }

    var pullKeys: Set<String> {
        if case .object(let members) = self { return Set(members.keys) }
        return []
    }

    var pullText: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}

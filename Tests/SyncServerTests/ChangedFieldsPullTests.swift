import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Pulls with `fields=changed`: rows the device holds as of its cursor come with only the
/// fields that changed since (``FieldSeqs``), whole whenever the server cannot name them. On the
/// engines' own contracts: the catalog's `Label` (published) and a team's `Board` (field_merge, pushed).
@Suite("Pull of changed fields only")
struct ChangedFieldsPullTests {
    let device = PullHarness.device()

    /// Every page of a scope after `cursor`, changed fields asked for.
    private func pullChanges(_ harness: PullHarness, _ scope: String, after cursor: String?, schema: [String: Int] = [:]) async throws -> [JSONValue]
    {
        let page = try await harness.pull.pull(
            scope: scope, cursor: cursor, limit: nil, schema: schema, clientID: nil, identity: device, changedFields: true
        )
        return page.upserts["Label"] ?? []
    }

    private static func keys(_ row: JSONValue) -> Set<String> {
        guard case .object(let object) = row else { return [] }
        return Set(object.keys)
    }

    private static func row(_ rows: [JSONValue], id: String) -> [String: JSONValue]? {
        for row in rows {
            if case .object(let object) = row, object["id"] == .string(id) { return object }
        }
        return nil
    }

    @Test("a row changed after the cursor comes with its changed fields, its version then and now", arguments: StorageKind.allCases)
    func changedFieldsOnly(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        try await harness.publish("Label", PullHarness.label("label-2"))
        let cursor = try #require(try await harness.pullAll("catalog", as: device).last?.cursor)
        try await harness.publish("Label", PullHarness.label("label-1", name: "Renamed"))

        let rows = try await pullChanges(harness, "catalog", after: cursor)
        #expect(rows.count == 1)
        let partial = try #require(Self.row(rows, id: "label-1"))
        #expect(partial["name"] == .string("Renamed"))
        #expect(partial["_base_version"] == .int(1))
        #expect(partial["_server_version"] == .int(2))
        #expect(partial["description"] == nil && partial["color"] == nil && partial["sort_index"] == nil)
        #expect(Set(partial.keys).isSubset(of: ["id", "name", "_base_version", "_server_version", "updated_at"]))

        // A device that did not ask gets the whole row, as before.
        let whole = try await harness.pull.pull(scope: "catalog", cursor: cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        let wholeRow = try #require(Self.row(whole.upserts["Label"] ?? [], id: "label-1"))
        #expect(wholeRow["_base_version"] == nil && wholeRow["description"] == .string("About label-1"))

        // Two later changes of other fields: both come, against the version at the cursor.
        try await harness.publish("Label", PullHarness.label("label-1", name: "Renamed", sortIndex: 4))
        try await harness.publish("Label", PullHarness.label("label-1", name: "Renamed", sortIndex: 4, uses: 25))
        let later = try #require(Self.row(try await pullChanges(harness, "catalog", after: cursor), id: "label-1"))
        #expect(later["_base_version"] == .int(1) && later["_server_version"] == .int(4))
        #expect(later["name"] == .string("Renamed") && later["sort_index"] == .int(4) && later["usage_count"] == .int(25))
        #expect(later["description"] == nil)
    }

    @Test("whole rows when the server cannot name the changes", arguments: StorageKind.allCases)
    func fallbacks(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        let cursor = try #require(try await harness.pullAll("catalog", as: device).last?.cursor)
        try await harness.publish("Label", PullHarness.label("label-1", name: "Renamed"))
        // Created after the cursor: the device cannot hold it.
        try await harness.publish("Label", PullHarness.label("label-new"))
        // Written by something that keeps no record of its fields.
        try await harness.publish("Label", PullHarness.label("label-raw"))
        let rawCursor = try #require(try await harness.pullAll("catalog", as: device).last?.cursor)
        let label = try #require(ContractRegistry.entity(named: "Label"))
        var raw = try await harness.storage.read { reader in
            try await reader.row(in: ContractTable(label), tenant: PullHarness.tenant, id: "label-raw")
        }
        #expect(raw.flatMap { FieldSeqs(of: $0) } != nil)
        raw?["name"] = .text("Raw")
        raw?[FieldSeqs.column] = .null
        try await harness.storage.write { [raw] transaction in
            var row = try #require(raw)
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: PullHarness.tenant, scopeKey: row.text("_scope_key") ?? ""))
            try await transaction.upsert(row, in: ContractTable(label))
        }

        let rows = try await pullChanges(harness, "catalog", after: cursor)
        #expect(Self.row(rows, id: "label-1")?["_base_version"] == .int(1))
        #expect(Self.row(rows, id: "label-new")?["_base_version"] == nil)
        #expect(Self.row(rows, id: "label-new")?["description"] == .string("About label-new"))
        let rawRow = try #require(Self.row(try await pullChanges(harness, "catalog", after: rawCursor), id: "label-raw"))
        #expect(rawRow["_base_version"] == nil && rawRow["name"] == .string("Raw") && rawRow["description"] != nil)

        // A device on an older version of the contract gets whole rows shaped for it.
        let old = try await pullChanges(harness, "catalog", after: cursor, schema: ["Label": 2])
        let oldRow = try #require(Self.row(old, id: "label-1"))
        #expect(oldRow["_base_version"] == nil && oldRow["position"] != nil)

        // Without a cursor, every row is whole.
        #expect(try await pullChanges(harness, "catalog", after: nil).allSatisfy { !Self.keys($0).contains("_base_version") })

        // Past a compaction (a cursor still good, but below the compacted sequence): whole rows.
        let position = try SyncCursor(encoded: cursor)
        try await harness.storage.write { transaction in
            try await transaction.raiseCompactedSequence(tenant: PullHarness.tenant, scopeKey: position.scopeKey, to: position.sequence + 1)
        }
        let reissued = SyncCursor(scopeKey: position.scopeKey, sequence: position.sequence, horizon: position.sequence + 1).encoded
        let afterCompaction = try await pullChanges(harness, "catalog", after: reissued)
        #expect(Self.row(afterCompaction, id: "label-1")?["description"] != nil)
        #expect(!afterCompaction.isEmpty && afterCompaction.allSatisfy { !Self.keys($0).contains("_base_version") })
    }

    @Test("the record forgets writes past its history: a cursor before them gets the whole row", arguments: StorageKind.allCases)
    func historyBound(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        let cursor = try #require(try await harness.pullAll("catalog", as: device).last?.cursor)
        for index in 1...FieldSeqs.historyLength {
            try await harness.publish("Label", PullHarness.label("label-1", name: "Name \(index)"))
        }
        let rows = try await pullChanges(harness, "catalog", after: cursor)
        let row = try #require(Self.row(rows, id: "label-1"))
        #expect(row["_base_version"] == nil && row["description"] != nil)
        #expect(row["name"] == .string("Name \(FieldSeqs.historyLength)"))
    }

    @Test("pushes record their changed fields: field_merge patches from two devices come as both fields", arguments: StorageKind.allCases)
    func pushedChanges(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let pull = PullService(storage: h.storage)
        try await h.push([h.mutation(1, "Board", .create, "board-1", h.boardPayload("board-1"), hlc: h.hlc(1000, "alice"))])
        let cursor = try await pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: PushHarness.alice).cursor
        try await h.push(
            [
                h.mutation(
                    1, "Board", .patch, "board-1", ["status": .string("paused")], hlc: h.hlc(2000, "bob"), base: ["status": .string("active")]
                )
            ], as: PushHarness.bob
        )
        try await h.push([
            h.mutation(2, "Board", .patch, "board-1", ["name": .string("Launch v2")], hlc: h.hlc(1500, "alice"), base: ["name": .string("Launch")])
        ])
        let page = try await pull.pull(
            scope: "team", cursor: cursor, limit: nil, schema: [:], clientID: nil, identity: PushHarness.alice, changedFields: true
        )
        guard case .object(let row)? = page.upserts["Board"]?.first else {
            Issue.record("no Board row in \(page.upserts)")
            return
        }
        #expect(row["status"] == .string("paused") && row["name"] == .string("Launch v2"))
        #expect(row["_base_version"] == .int(1) && row["_server_version"] == .int(3))
        #expect(row["owner_id"] == nil && row["created_at"] == nil && row["team_id"] == nil)
        #expect(row["id"] == .string("board-1"))

        // A pull from between the two patches names only the second one's field (and the clock).
        let stored = try #require(try await h.row(Board.descriptor, "board-1"))
        let record = try #require(FieldSeqs(of: stored))
        #expect(record.writes.map(\.version) == [1, 2, 3])
        let between = try #require(record.changes(after: record.writes[1].seq))
        #expect(between.baseVersion == 2 && between.fields.contains("name") && !between.fields.contains("status"))
    }
}

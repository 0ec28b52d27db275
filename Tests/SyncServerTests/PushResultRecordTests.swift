import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import PostgresNIO
import SyncProtocol
import Testing

@testable import SyncServer

/// A push's results are stored as one record; a resend is answered from the records, whichever
/// seqs it names, and a database whose results were stored a row per mutation keeps answering. On
/// the engines' own contracts (`Card`).
@Suite("Push result records")
struct PushResultRecordTests {
    @Test("a resend across two pushes is answered from each push's record, as first answered, writing nothing", arguments: StorageKind.allCases)
    func resendAcrossRecords(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let first = [
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "Card", .update, "card-missing", ["title": .string("nobody has it")], baseVersion: 1),
            h.mutation(3, "Card", .create, "card-3", h.cardPayload("card-3")),
        ]
        let second = [
            h.mutation(4, "Card", .create, "card-4", h.cardPayload("card-4")),
            h.mutation(5, "Card", .update, "card-1", ["title": .string("renamed")], baseVersion: 1),
        ]
        let answeredFirst = try await h.push(first)
        let answeredSecond = try await h.push(second)
        #expect(answeredFirst.results[1].status != .applied, "a refused mutation has its result stored too")

        var records: [PushResultRecord?] = []
        for seq: Int64 in [1, 3, 4, 5, 6] {
            records.append(try await h.storage.read { try await $0.pushResults(tenant: PushHarness.tenant, clientID: "alice-phone", covering: seq) })
        }
        #expect(records.map { $0?.firstSeq } == [1, 1, 4, 4, nil])
        #expect(records[0]?.results.count == 3 && records[2]?.results.count == 2)
        #expect(records[0]?.results == answeredFirst.results.map(\.storedText))

        let auditBefore = try await h.audit().count
        let cardBefore = try await h.row(Card.descriptor, "card-1")
        // From inside the first record to the end of the second.
        let resent = try await h.push(Array(first[1...]) + second)
        #expect(resent.results == Array(answeredFirst.results[1...]) + answeredSecond.results)
        #expect(resent.lastSeq == 5)
        #expect(try await h.audit().count == auditBefore)
        #expect(try await h.row(Card.descriptor, "card-1") == cardBefore)
    }

    /// The results as the release before stored them: a row per (client, seq).
    static let storedBefore = [
        (seq: 1, text: #"{"client_mutation_id":"m-1","seq":1,"server_version":1,"status":"applied"}"#),
        (seq: 2, text: #"{"client_mutation_id":"m-2","error":{"code":"not_found","message":"gone"},"seq":2,"status":"rejected"}"#),
    ]

    @Test(
        "results stored a row per mutation before the upgrade become records of one, and a resend is answered from them",
        arguments: StorageKind.allCases)
    func upgradeKeepsEveryResult(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-results-upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let client =
            "INSERT INTO clients (tenant, client_id, last_seq, updated_at, user_id, device_id, acked_seq) VALUES ('t1', 'alice-phone', 2, 0, 'alice', 'alice-phone', 0)"
        let results = Self.storedBefore.map { "('t1', 'alice-phone', \($0.seq), 'm-\($0.seq)', '\($0.text)', 0)" }.joined(separator: ", ")
        let insertResults = "INSERT INTO push_results (tenant, client_id, seq, client_mutation_id, result, recorded_at) VALUES \(results)"
        let storage: any SyncStorage
        switch kind {
        case .sqlite:
            // The database as the release before left it: every upgrade up to the data horizons.
            let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
            try SQLiteStorage.migrator(contracts: ContractCatalog(ContractRegistry.self)).migrate(queue, upTo: ServerUpgrade.horizons.identifier)
            try await queue.write { db in
                try db.execute(sql: client)
                try db.execute(sql: insertResults)
            }
            try queue.close()
            storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        case .postgres:
            // A schema migrated before, then put back as the release before left it.
            let schema = StorageKind.uniqueSchema()
            _ = try await StorageKind.postgres.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)
            let probe = try PostgresProbe(schema: schema)
            for sql in [
                "DROP TABLE push_results",
                """
                CREATE TABLE push_results (tenant TEXT NOT NULL, client_id TEXT NOT NULL, seq BIGINT NOT NULL, client_mutation_id TEXT NOT NULL,
                    result TEXT NOT NULL, recorded_at BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (tenant, client_id, seq))
                """,
                "DELETE FROM outpost_migrations WHERE identifier = '\(ServerUpgrade.pushResultRecords.identifier)'",
                client, insertResults,
            ] {
                _ = try await probe.client.query(PostgresQuery(unsafeSQL: sql)).collect()
            }
            storage = try await StorageKind.postgres.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)[0]
        }
        let first = try await storage.read { try await $0.pushResults(tenant: "t1", clientID: "alice-phone", covering: 1) }
        #expect(first == PushResultRecord(firstSeq: 1, results: [Self.storedBefore[0].text]))

        let service = PushService(storage: storage, clock: PushFixedClock(), reducers: [])
        let mutations = (1...3).map { seq in
            Mutation(
                seq: Int64(seq), clientMutationId: "m-\(seq)", entity: "Card", op: .create, id: "card-\(seq)",
                payload: .object([
                    "id": .string("card-\(seq)"), "team_id": .string("red"), "board_id": .string("board-1"), "title": .string("Draft the plan"),
                    "lane": .string("todo"),
                ])
            )
        }
        let response = try await service.push(PushRequest(clientId: "alice-phone", schema: [:], mutations: mutations), identity: PushHarness.alice)
        #expect(response.results.prefix(2).map(\.storedText) == Self.storedBefore.map(\.text), "answered as stored before the upgrade")
        #expect(response.results[2].seq == 3)
        #expect(response.lastSeq == 3)
        if let postgres = storage as? PostgresStorage { await postgres.close() }
    }
}

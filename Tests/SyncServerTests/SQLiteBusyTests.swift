import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A SQLite data folder locked by another process (a second `sync-server`, a backup) past the
/// busy timeout: the push is answered 503 `storage_unavailable` with `Retry-After`, nothing of it
/// is written, and sent again once the lock is gone it is applied once. On the engines' own contracts.
@Suite("SQLite locked by another process", .blockingWork)
struct SQLiteBusyTests {
    @Test(
        "a push that meets a lock held past the busy timeout is 503 storage_unavailable with Retry-After, writes nothing, and goes through when sent again"
    )
    func lockedDatabaseIsUnavailableNotAnError() async throws {
        let folder = CLITests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(
            directory: folder, contracts: ContractCatalog(ContractRegistry.self), auditKey: nil, busyTimeout: 0.2)
        let service = PushService(storage: storage, clock: PushFixedClock(), reducers: [])
        let card: [String: JSONValue] = [
            "id": .string("card-1"), "team_id": .string("red"), "board_id": .string("board-1"), "title": .string("Draft"), "lane": .string("todo"),
        ]
        let request = PushRequest(
            clientId: "c-1", schema: [:],
            mutations: [Mutation(seq: 1, clientMutationId: "m-1", entity: "Card", op: .create, id: "card-1", payload: .object(card))])

        // Another process's write transaction: a connection of its own holding the write lock.
        var holding = Configuration()
        holding.allowsUnsafeTransactions = true
        let other = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path, configuration: holding)
        try other.inDatabase { try $0.execute(sql: "BEGIN IMMEDIATE") }
        do {
            _ = try await service.push(request, identity: PushHarness.alice)
            Issue.record("the push went through a lock another process held")
        } catch {
            #expect(error.status == 503 && error.detail.code == .storageUnavailable, "\(error)")
            #expect(error.retryAfter == ServiceError.storageRetryAfter)
        }
        let written = try await storage.read { try await $0.lastSequence(tenant: PushHarness.alice.tenant, clientID: "c-1") }
        #expect(written == 0, "nothing of the refused push is stored")

        try other.inDatabase { try $0.execute(sql: "ROLLBACK") }
        try other.close()
        let response = try await service.push(request, identity: PushHarness.alice)
        #expect(response.results.map(\.status) == [.applied])
    }
}

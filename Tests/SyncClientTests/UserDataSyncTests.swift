import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// What the server's data obligations look like from a device, against the real server: an
/// urgent change (a withdrawn unit) is stored before any page of the next pull. It stays on the
/// sample's contracts: the withdrawal takes the unit's lessons with it, and the engines' own
/// catalog has no rows under another. A device whose user was erased: `ErasedUserSyncTests`, on
/// the engines' own contracts.
@Suite struct UserDataSyncTests {
    static let scopes = ["user", "team", "content"]

    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        engine(store, transport, scopes: Self.scopes, pageSize: nil)
    }

    func engine(_ store: OfflineStore, _ transport: any SyncTransport, scopes: [String], pageSize: Int?) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: scopes, pullPageSize: pageSize, retriesAutomatically: false)
        )
    }

    /// Forwards to the real transport and notes each request.
    final class RequestLog: SyncTransport, @unchecked Sendable {
        let inner: URLSessionTransport
        private let lock = NSLock()
        private var calls: [String] = []

        init(_ inner: URLSessionTransport) { self.inner = inner }

        var requests: [String] { lock.withLock { calls } }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
            try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
        }

        func pull(
            scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
        ) async throws(TransportError) -> Data {
            lock.withLock { calls.append("pull \(scope)") }
            return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
        }

        var filtersPullsByContract: Bool { inner.filtersPullsByContract }

        func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
            lock.withLock { calls.append("urgent \(scope)") }
            return try await inner.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
        }

        func health() async -> Bool { await inner.health() }
    }

    /// The store's commits that changed one table, each as the kinds of change it made there, in
    /// commit order: what a device stored when, whatever the order its requests went in.
    final class TableCommits: TransactionObserver, @unchecked Sendable {
        let table: String
        private let lock = NSLock()
        private var pending: Set<String> = []
        private var committed: [Set<String>] = []

        init(_ table: String) { self.table = table }

        var commits: [Set<String>] { lock.withLock { committed } }

        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { eventKind.tableName == table }

        func databaseDidChange(with event: DatabaseEvent) {
            let kind: String
            switch event.kind {
            case .insert: kind = "insert"
            case .update: kind = "update"
            case .delete: kind = "delete"
            }
            lock.withLock { _ = pending.insert(kind) }
        }

        func databaseDidCommit(_ db: Database) {
            lock.withLock {
                if !pending.isEmpty { committed.append(pending) }
                pending = []
            }
        }

        func databaseDidRollback(_ db: Database) { lock.withLock { pending = [] } }
    }

    /// A device that synced units u-1 and u-2, then three units published and u-1 withdrawn,
    /// marked urgent; `body` syncs it again and checks what it did.
    func afterAWithdrawal(
        scopes: [String], _ body: @escaping @Sendable (LiveServer, OfflineStore, TableCommits) async throws -> Void
    ) async throws {
        try await LiveServer.run { server in
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            try await server.publishUnit("u-1", lessons: [[]])
            try await server.publishUnit("u-2", lessons: [[]])
            let first = engine(store, server.transport("d-1"), scopes: scopes, pageSize: nil)
            guard case .succeeded = await first.syncNow() else { Issue.record("first sync"); return }
            #expect(try store.fetch(Unit.self, id: "u-1") != nil)

            // Ordinary changes, then the unit is withdrawn, marked urgent: the last change of the scope.
            for id in ["u-3", "u-4", "u-5"] { try await server.publishUnit(id, lessons: [[]]) }
            try await server.content.delete(entity: "Unit", id: "u-1", identity: LiveServer.admin, urgent: true)

            let units = TableCommits(Unit.descriptor.table)
            store.pool.add(transactionObserver: units)
            try await body(server, store, units)
            #expect(try store.fetch(Unit.self, id: "u-1") == nil)
            #expect(try store.fetch(Lesson.self, id: "u-1-lesson-0") == nil)
            for id in ["u-2", "u-3", "u-4", "u-5"] { #expect(try store.fetch(Unit.self, id: id) != nil) }
        }
    }

    @Test func anUrgentChangeIsStoredBeforeAnyPageOfTheNextPull() async throws {
        try await afterAWithdrawal(scopes: Self.scopes) { server, store, units in
            // Pages of one row: the withdrawal is the content scope's last change, four pages on.
            let log = RequestLog(server.transport("d-1"))
            guard case .succeeded = await engine(store, log, scopes: Self.scopes, pageSize: 1).syncNow() else {
                Issue.record("second sync")
                return
            }
            let withdrawn = try #require(units.commits.firstIndex { $0.contains("delete") }, "the withdrawal was stored")
            let firstPage = try #require(units.commits.firstIndex { $0.contains("insert") }, "the new units were stored")
            #expect(withdrawn < firstPage, "the withdrawn unit was stored with or after a page: \(units.commits)")
            let firstPull = try #require(log.requests.firstIndex { $0.hasPrefix("pull") })
            #expect(log.requests[..<firstPull].contains("urgent content"))
        }
    }
}

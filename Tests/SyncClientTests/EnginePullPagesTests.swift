import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol
import Testing

/// How the engine walks a scope's pages: each page with its cursor in one transaction, in
/// order, the next page asked for while the current one is stored.
@Suite struct EnginePullPagesTests {
    static let pageCount = 3
    static let rowsPerPage = 4

    /// `Attempt` rows of page `page`, as the server sends them.
    static func rows(page: Int, valid: Bool = true) -> [JSONValue] {
        (0..<rowsPerPage).map { index in
            var row: [String: JSONValue] = [
                "id": .string("at-\(page)-\(index)"), "assessment_id": .string("a-1"), "state": .string("submitted"),
                "score": .double(Double(index)), "answered_count": .int(4), "started_at": .string("2026-01-30T08:00:00.000Z"),
                "updated_at": .string("2026-01-31T08:00:00.000Z"), "_server_version": .int(1),
            ]
            if !valid { row["started_at"] = .string("not a time") }
            return .object(row)
        }
    }

    /// Serves pages `c0` (no cursor) … of the `user` scope, recording every cursor asked for;
    /// one cursor can be made to fail, one page to carry a row the store refuses.
    final class PagedTransport: SyncTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var asked: [String?] = []
        var failing: String?
        var invalidPage: Int?
        /// Called with each cursor asked for, before the page is served.
        var onPull: @Sendable (String?) -> Void = { _ in }

        var cursors: [String?] { lock.withLock { asked } }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
            -> PullResponse
        {
            let failing = lock.withLock {
                asked.append(cursor)
                return self.failing
            }
            onPull(cursor)
            if let failing, cursor == failing { throw .network("connection reset") }
            let page = cursor.flatMap { Int($0.dropFirst()) }.map { $0 + 1 } ?? 1
            return PullResponse(
                cursor: "c\(page)", hasMore: page < EnginePullPagesTests.pageCount,
                upserts: ["Attempt": EnginePullPagesTests.rows(page: page, valid: page != invalidPage)], deletes: [:], lastSeq: 0
            )
        }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
            PushResponse(results: [], lastSeq: 0)
        }

        func health() async -> Bool { true }
    }

    static func engine(_ store: OfflineStore, _ transport: PagedTransport) -> SyncEngine {
        SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: ["user"], retriesAutomatically: false))
    }

    static func storedAttempts(_ test: TestStore) throws -> [String] {
        try test.raw { db in try String.fetchAll(db, sql: #"SELECT "id" FROM "attempts" ORDER BY "id""#) }
    }

    @Test func everyPageIsStoredWithItsCursorInOrder() async throws {
        let test = try TestStore()
        let transport = PagedTransport()
        let result = await Self.engine(test.store, transport).syncNow()
        #expect(result == .succeeded(pushed: 0, pulled: Self.pageCount * Self.rowsPerPage))
        #expect(transport.cursors == [nil, "c1", "c2"])
        #expect(try Self.storedAttempts(test).count == Self.pageCount * Self.rowsPerPage)
        #expect(try test.store.cursor(forScope: "user") == "c3")
    }

    @Test func theNextPageIsAskedForWhileThisOneIsStored() async throws {
        let test = try TestStore()
        let transport = PagedTransport()
        // Serving page 1 takes the database's write lock from another connection, so storing
        // page 1 has to wait; only the request for page 2 releases it (or, failing that, 5 s).
        let blocker = try WriteLock(path: test.directory.databaseURL.path)
        transport.onPull = { cursor in
            if cursor == nil { blocker.take() }
            if cursor == "c1" { blocker.release() }
        }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(5))
            return blocker.release()
        }
        let result = await Self.engine(test.store, transport).syncNow()
        timeout.cancel()
        #expect(await timeout.value == false, "page 2 was not asked for while page 1 waited to be stored")
        #expect(result == .succeeded(pushed: 0, pulled: Self.pageCount * Self.rowsPerPage))
        #expect(try test.store.cursor(forScope: "user") == "c3")
    }

    /// A write transaction held open on another connection.
    final class WriteLock: @unchecked Sendable {
        private let queue: DatabaseQueue
        private let lock = NSLock()
        private var held = false

        init(path: String) throws {
            var configuration = Configuration()
            configuration.allowsUnsafeTransactions = true
            queue = try DatabaseQueue(path: path, configuration: configuration)
        }

        func take() {
            lock.withLock {
                guard !held else { return }
                held = (try? queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }) != nil
            }
        }

        /// Ends the transaction; whether it was still held.
        @discardableResult
        func release() -> Bool {
            lock.withLock {
                guard held else { return false }
                try? queue.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
                held = false
                return true
            }
        }
    }

    @Test func aFailedPageLeavesTheOnesBeforeItAndTheNextSyncResumesThere() async throws {
        let test = try TestStore()
        let transport = PagedTransport()
        transport.failing = "c2"
        let engine = Self.engine(test.store, transport)
        guard case .failed(.network(_), _) = await engine.syncNow() else {
            Issue.record("the sync did not fail on page 3")
            return
        }
        #expect(try Self.storedAttempts(test).count == 2 * Self.rowsPerPage)
        #expect(try test.store.cursor(forScope: "user") == "c2")

        transport.failing = nil
        #expect(await engine.syncNow() == .succeeded(pushed: 0, pulled: Self.rowsPerPage))
        #expect(transport.cursors == [nil, "c1", "c2", "c2"])
        #expect(try Self.storedAttempts(test).count == Self.pageCount * Self.rowsPerPage)
    }

    @Test func aPageTheStoreRefusesIsNotStoredAndNeitherIsItsCursor() async throws {
        let test = try TestStore()
        let transport = PagedTransport()
        transport.invalidPage = 2
        guard case .storeFailed = await Self.engine(test.store, transport).syncNow() else {
            Issue.record("the sync did not fail on page 2")
            return
        }
        #expect(try Self.storedAttempts(test) == Self.rows(page: 1).compactMap { row -> String? in
            guard case .object(let fields) = row, case .string(let id)? = fields["id"] else { return nil }
            return id
        })
        #expect(try test.store.cursor(forScope: "user") == "c1")
    }
}

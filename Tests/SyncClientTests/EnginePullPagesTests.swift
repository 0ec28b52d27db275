import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// How the engine walks a scope's pages: in order, committed together with the last one's
/// cursor up to `pullCommitRows` rows per transaction, the next pages asked for while the
/// current ones are stored, and never more than `pullCommitRows` rows fetched ahead.
@Suite struct EnginePullPagesTests {
    static let pageCount = 3
    static let rowsPerPage = 4

    /// `Note` rows of page `page`, as the server sends them.
    static func rows(page: Int, valid: Bool = true) -> [JSONValue] {
        (0..<rowsPerPage).map { index in
            var row: [String: JSONValue] = [
                "id": .string("note-\(page)-\(index)"), "team_id": .string("team-1"), "card_id": .string("card-1"),
                "author_id": .string("u-2"), "body": .string("Note \(index)"), "reading_minutes": .double(Double(index)),
                "word_count": .int(4), "updated_at": .string("2026-01-31T08:00:00.000Z"), "_server_version": .int(1),
            ]
            if !valid { row["updated_at"] = .string("not a time") }
            return .object(row)
        }
    }

    /// Serves pages `c0` (no cursor) … of the `team` scope, recording every cursor asked for;
    /// one cursor can be made to fail, one page to carry a row the store refuses.
    final class PagedTransport: SyncTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var asked: [String?] = []
        var failing: String?
        var invalidPage: Int?
        var pageCount = EnginePullPagesTests.pageCount
        /// Called with each cursor asked for, before the page is served.
        var onPull: @Sendable (String?) -> Void = { _ in }

        var cursors: [String?] { lock.withLock { asked } }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
            -> Data
        {
            let failing = lock.withLock {
                asked.append(cursor)
                return self.failing
            }
            onPull(cursor)
            if let failing, cursor == failing { throw .network("connection reset") }
            let page = cursor.flatMap { Int($0.dropFirst()) }.map { $0 + 1 } ?? 1
            let response = PullResponse(
                cursor: "c\(page)", hasMore: page < pageCount,
                upserts: ["Note": EnginePullPagesTests.rows(page: page, valid: page != invalidPage)], deletes: [:], lastSeq: 0
            )
            do { return try JSONEncoder().encode(response) } catch { throw .decoding("\(error)") }
        }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
            PushResponse(results: [], lastSeq: 0)
        }

        func health() async -> Bool { true }
    }

    static func engine(_ store: OfflineStore, _ transport: PagedTransport, commitRows: Int? = nil) -> SyncEngine {
        var configuration = SyncEngineConfiguration(scopes: ["team"], retriesAutomatically: false)
        if let commitRows { configuration.pullCommitRows = commitRows }
        return SyncEngine(store: store, transport: transport, configuration: configuration)
    }

    static func storedNotes(_ test: TestStore) throws -> [String] {
        try test.raw { db in try String.fetchAll(db, sql: #"SELECT "id" FROM "notes" ORDER BY "id""#) }
    }

    @Test func everyPageIsStoredWithItsCursorInOrder() async throws {
        let test = try TestStore.engine()
        let transport = PagedTransport()
        let result = await Self.engine(test.store, transport).syncNow()
        #expect(result == .succeeded(pushed: 0, pulled: Self.pageCount * Self.rowsPerPage))
        #expect(transport.cursors == [nil, "c1", "c2"])
        #expect(try Self.storedNotes(test).count == Self.pageCount * Self.rowsPerPage)
        #expect(try test.store.cursor(forScope: "team") == "c3")
    }

    @Test func pagesAreCommittedTogetherUpToTheCommitRows() async throws {
        let test = try TestStore.engine()
        let transport = PagedTransport()
        transport.pageCount = 5
        let engine = Self.engine(test.store, transport, commitRows: 2 * Self.rowsPerPage)
        let stream = await engine.status
        let collector = Task {
            var done: [Int] = []
            for await status in stream {
                if case .pulling = status.phase, status.progress.done > 0, done.last != status.progress.done { done.append(status.progress.done) }
                if status.phase == .idle, status.lastSuccess != nil { break }
            }
            return done
        }
        #expect(await engine.syncNow() == .succeeded(pushed: 0, pulled: 5 * Self.rowsPerPage))
        // Page 1 alone (a pull's first batches are smaller: one page, then as many rows as
        // stored so far), page 2 alone, pages 3–4, then the last page alone: one transaction
        // (and one progress step) each.
        #expect(await collector.value == [4, 8, 16, 20])
        #expect(try Self.storedNotes(test).count == 5 * Self.rowsPerPage)
        #expect(try test.store.cursor(forScope: "team") == "c5")
    }

    @Test func noMoreThanTheCommitRowsAreFetchedAheadOfASlowStore() async throws {
        // Every page takes 40 ms to store; the transport answers at once.
        let directory = try TemporaryDirectory()
        var configuration = TestStore.configuration(
            directory: directory, clock: ManualClock(TestStore.start), keys: FileKeyProvider(directory: directory.keysURL)
        )
        configuration.faultPauses = FaultPauses(pauses: [.pullApply: .init(milliseconds: 40)])
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self)
        let transport = PagedTransport()
        transport.pageCount = 12
        let ahead = LockedBox<[Int]>([])
        transport.onPull = { cursor in
            // Page k is asked for: how many pages past the last one stored?
            let asked = cursor.flatMap { Int($0.dropFirst()) }.map { $0 + 1 } ?? 1
            let stored = (try? store.cursor(forScope: "team"))?.flatMap { Int($0.dropFirst()) } ?? 0
            ahead.mutate { $0.append(asked - stored) }
        }
        #expect(await Self.engine(store, transport, commitRows: Self.rowsPerPage).syncNow() == .succeeded(pushed: 0, pulled: 12 * Self.rowsPerPage))
        #expect(try store.cursor(forScope: "team") == "c12")
        // Page k is asked for while page k-1 is prepared, k-2 waits (4 rows ahead) and k-3 is
        // being stored: never further than 4 pages past the last stored, and it does run ahead.
        let distances = ahead.value
        #expect((2...4).contains(distances.max() ?? 0), "pages asked for ahead of the store: \(distances)")
        try store.close()
    }

    @Test func theNextPageIsAskedForWhileThisOneIsStored() async throws {
        let test = try TestStore.engine()
        let transport = PagedTransport()
        // Serving page 1 takes the database's write lock from another connection, so storing
        // page 1 has to wait; only the request for page 2 releases it (or, failing that, 20 s:
        // long enough that a loaded machine does not fail it).
        let blocker = try WriteLock(path: test.directory.databaseURL.path)
        transport.onPull = { cursor in
            if cursor == nil { blocker.take() }
            if cursor == "c1" { blocker.release() }
        }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(20))
            return blocker.release()
        }
        let result = await Self.engine(test.store, transport).syncNow()
        timeout.cancel()
        #expect(await timeout.value == false, "page 2 was not asked for while page 1 waited to be stored")
        #expect(result == .succeeded(pushed: 0, pulled: Self.pageCount * Self.rowsPerPage))
        #expect(try test.store.cursor(forScope: "team") == "c3")
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
        let test = try TestStore.engine()
        let transport = PagedTransport()
        transport.failing = "c2"
        let engine = Self.engine(test.store, transport)
        guard case .failed(.network(_), _) = await engine.syncNow() else {
            Issue.record("the sync did not fail on page 3")
            return
        }
        #expect(try Self.storedNotes(test).count == 2 * Self.rowsPerPage)
        #expect(try test.store.cursor(forScope: "team") == "c2")

        transport.failing = nil
        #expect(await engine.syncNow() == .succeeded(pushed: 0, pulled: Self.rowsPerPage))
        #expect(transport.cursors == [nil, "c1", "c2", "c2"])
        #expect(try Self.storedNotes(test).count == Self.pageCount * Self.rowsPerPage)
    }

    /// Pages 1–3 go to the store together; it refuses page 2's rows, so they are stored again one
    /// at a time: page 1 stays, page 2 and everything after it does not.
    @Test func aPageTheStoreRefusesIsNotStoredAndNeitherIsItsCursor() async throws {
        let test = try TestStore.engine()
        let transport = PagedTransport()
        transport.invalidPage = 2
        guard case .storeFailed = await Self.engine(test.store, transport).syncNow() else {
            Issue.record("the sync did not fail on page 2")
            return
        }
        #expect(
            try Self.storedNotes(test)
                == Self.rows(page: 1).compactMap { row -> String? in
                    guard case .object(let fields) = row, case .string(let id)? = fields["id"] else { return nil }
                    return id
                })
        #expect(try test.store.cursor(forScope: "team") == "c1")
    }
}

import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The crash tests kill a device at `pull-apply` to prove a page and its cursor commit together;
/// that only proves something if the pause is inside the page's transaction.
@Suite("The pull-apply pause of the crash tests", .blockingWork)
struct PageFaultPauseTests {
    // Synchronous, with the page applied on a thread of its own: nothing here waits for the
    // concurrency pool, which end-to-end tests running beside this one may keep busy.
    @Test("while paused, neither the page's rows nor its cursor are visible to another connection")
    func pauseHoldsThePageUncommitted() throws {
        let directory = try TemporaryDirectory()
        var configuration = TestStore.configuration(
            directory: directory, clock: ManualClock(TestStore.start), keys: FileKeyProvider(directory: directory.keysURL)
        )
        configuration.faultPauses = FaultPauses(pauses: [.pullApply: FaultPauses.Pause(milliseconds: 4000)])
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self)
        let page = ServerChanges(upserts: ["Label": [EngineSamples.wire(EngineSamples.labels[0])]], scopeKey: "catalog", cursor: "cursor-1")
        let applied = DispatchSemaphore(value: 0)
        Thread {
            _ = try? store.applyServerChanges(page)
            applied.signal()
        }.start()

        var observer = Configuration()
        observer.busyMode = .immediateError
        let queue = try DatabaseQueue(path: directory.databaseURL.path, configuration: observer)
        defer { try? queue.close() }
        func visible() throws -> (labels: Int, cursor: String?) {
            try queue.read { db in
                (
                    try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "labels""#) ?? 0,
                    try String.fetchOne(db, sql: #"SELECT "cursor" FROM "sync_state" WHERE "scope_key" = 'catalog'"#)
                )
            }
        }
        // The page's write transaction is open once another writer is refused (the pause is long
        // enough for this probe to start on a loaded machine).
        var open = false
        let deadline = Date().addingTimeInterval(10)
        while !open, Date() < deadline {
            do {
                try queue.inTransaction(.immediate) { _ in .rollback }
                usleep(2_000)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                open = true
            }
        }
        try #require(open, "the page's transaction was never seen open")
        let during = try visible()
        #expect(during.labels == 0)
        #expect(during.cursor == nil)

        applied.wait()
        let after = try visible()
        #expect(after.labels == 1)
        #expect(after.cursor == "cursor-1")
    }
}

import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// A device whose user the server erased, against the real server on the engines' own
/// contracts: it wipes its store and stops.
@Suite struct ErasedUserSyncTests {
    static let scopes = ["user", "team", "catalog"]

    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: Self.scopes, retriesAutomatically: false))
    }

    static func activity(_ uuid: String) -> ActivityRecord {
        ActivityRecord(
            id: UUID(uuidString: uuid)!, verb: .viewed, subjectId: "card-1", happenedAt: EngineSamples.t0,
            happenedOn: CalendarDate(year: 2026, month: 1, day: 31))
    }

    static let first = "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b"
    static let second = "0a9b8c7d-6e5f-4a3b-8c1d-2e3f4a5b6c7d"

    @Test func aDeviceOfAnErasedUserWipesItsStoreAndStops() async throws {
        try await LiveServer.engine { server in
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            try store.create(Self.activity(Self.first))
            let engine = engine(store, server.transport("d-1"))
            guard case .succeeded = await engine.syncNow() else { Issue.record("first sync"); return }

            let report = try await UserErasure(storage: server.storage).erase(tenant: "acme", userID: "u-1", requestedBy: .commandLine)
            #expect(report.rowsErased >= 1)
            try store.create(Self.activity(Self.second))

            guard case .failed(let error, let retryAt) = await engine.syncNow() else { Issue.record("the sync after the erasure succeeded"); return }
            #expect(error.isUserErased)
            #expect(retryAt == nil)
            let status = await engine.currentStatus
            #expect(status.accountErased)
            #expect(status.lastError?.code == .userErased)
            #expect(!FileManager.default.fileExists(atPath: directory.databaseURL.path))
            #expect(throws: OfflineStoreError.self) { _ = try store.fetch(ActivityRecord.self, id: Self.second) }

            // Later syncs answer the same, without a request.
            guard case .failed(let again, nil) = await engine.syncNow() else { Issue.record("a later sync ran"); return }
            #expect(again.isUserErased)
        }
    }
}

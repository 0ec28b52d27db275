import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// What the server's data obligations look like from a device, against the real server: an
/// urgent change (a withdrawn unit) is stored before any page of the next pull, and a device
/// whose user was erased wipes its store.
@Suite struct UserDataSyncTests {
    static let scopes = ["user", "team", "content"]

    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: Self.scopes, retriesAutomatically: false))
    }

    /// Forwards to the real transport and, at the first pull page asked for, notes what the
    /// store held then.
    final class FirstPageProbe: SyncTransport, @unchecked Sendable {
        let inner: URLSessionTransport
        let probe: @Sendable () -> Bool
        private let lock = NSLock()
        private var calls: [String] = []
        private var heldAtFirstPage: Bool?

        init(_ inner: URLSessionTransport, probe: @escaping @Sendable () -> Bool) {
            self.inner = inner
            self.probe = probe
        }

        var requests: [String] { lock.withLock { calls } }
        var probeAtFirstPage: Bool? { lock.withLock { heldAtFirstPage } }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
            try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
        }

        func pull(
            scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
        ) async throws(TransportError) -> Data {
            let result = probe()
            lock.withLock {
                calls.append("pull \(scope)")
                if heldAtFirstPage == nil { heldAtFirstPage = result }
            }
            return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
        }

        var filtersPullsByContract: Bool { inner.filtersPullsByContract }

        func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
            lock.withLock { calls.append("urgent \(scope)") }
            return try await inner.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
        }

        func health() async -> Bool { await inner.health() }
    }

    @Test func anUrgentChangeIsStoredBeforeAnyPageOfTheNextPull() async throws {
        try await LiveServer.run { server in
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            try await server.publishUnit("u-1", lessons: [[]])
            try await server.publishUnit("u-2", lessons: [[]])
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("first sync"); return }
            #expect(try store.fetch(Unit.self, id: "u-1") != nil)

            // Ordinary changes in every scope, then the unit is withdrawn, marked urgent.
            for id in ["u-3", "u-4", "u-5"] { try await server.publishUnit(id, lessons: [[]]) }
            try await server.content.delete(entity: "Unit", id: "u-1", identity: LiveServer.admin, urgent: true)

            let probe = FirstPageProbe(server.transport("d-1")) { (try? store.fetch(Unit.self, id: "u-1")) == nil }
            guard case .succeeded = await engine(store, probe).syncNow() else { Issue.record("second sync"); return }
            #expect(probe.probeAtFirstPage == true, "the withdrawn unit was still on the device when the first page was asked for")
            let firstPull = try #require(probe.requests.firstIndex { $0.hasPrefix("pull") })
            #expect(probe.requests[..<firstPull].contains("urgent content"))
            #expect(try store.fetch(Unit.self, id: "u-1") == nil)
            #expect(try store.fetch(Lesson.self, id: "u-1-lesson-0") == nil)
            for id in ["u-2", "u-3", "u-4", "u-5"] { #expect(try store.fetch(Unit.self, id: id) != nil) }
        }
    }

    @Test func aDeviceOfAnErasedUserWipesItsStoreAndStops() async throws {
        try await LiveServer.run { server in
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            try store.create(Statement(id: "st-1", verb: .experienced, objectId: "lesson-1", statedAt: Samples.t0))
            let engine = engine(store, server.transport("d-1"))
            guard case .succeeded = await engine.syncNow() else { Issue.record("first sync"); return }

            let report = try await UserErasure(storage: server.storage).erase(tenant: "acme", userID: "u-1", requestedBy: .commandLine)
            #expect(report.rowsErased >= 1)
            try store.create(Statement(id: "st-2", verb: .experienced, objectId: "lesson-2", statedAt: Samples.t0))

            guard case .failed(let error, let retryAt) = await engine.syncNow() else { Issue.record("the sync after the erasure succeeded"); return }
            #expect(error.isUserErased)
            #expect(retryAt == nil)
            let status = await engine.currentStatus
            #expect(status.accountErased)
            #expect(status.lastError?.code == .userErased)
            #expect(!FileManager.default.fileExists(atPath: directory.databaseURL.path))
            #expect(throws: OfflineStoreError.self) { _ = try store.fetch(Statement.self, id: "st-2") }

            // Later syncs answer the same, without a request.
            guard case .failed(let again, nil) = await engine.syncNow() else { Issue.record("a later sync ran"); return }
            #expect(again.isUserErased)
        }
    }
}

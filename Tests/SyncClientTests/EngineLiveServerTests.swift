import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// A transport that fails with a network error while `offline` is set, otherwise forwards.
final class SwitchableTransport: SyncTransport {
    let inner: any SyncTransport
    private let state = LockedFlag()

    init(_ inner: any SyncTransport) { self.inner = inner }

    var offline: Bool {
        get { state.value }
        set { state.value = newValue }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        if offline { throw .network("offline") }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> PullResponse
    {
        if offline { throw .network("offline") }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { offline ? false : await inner.health() }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool {
        get { lock.withLock { flag } }
        set { lock.withLock { flag = newValue } }
    }
}

@Suite struct EngineLiveServerTests {
    static let secret = Data(repeating: 7, count: 32)

    /// Runs `body` with the base URL of a real server on a loopback port and a token maker.
    func withServer(_ body: @Sendable (URL, @escaping @Sendable (String) -> String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("engine-live-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder)
        let assets = AssetStore(directory: folder.appendingPathComponent("assets"))
        let signer = try TokenSigner(secret: Self.secret)
        let environment = ServerEnvironment(storage: storage, assets: assets, signer: signer)
        let app = buildApplication(configuration: ServerConfiguration(port: 0, rateLimit: nil), environment: environment)
        try await app.test(.live) { client in
            let url = URL(string: "http://127.0.0.1:\(client.port!)")!
            try await body(url) { device in
                signer.sign(
                    DeviceIdentity(
                        tenant: "acme", userID: "u-1", deviceID: device, teams: ["team-1"], isAdmin: false,
                        expiresAt: Int64(Date().timeIntervalSince1970) + 3600
                    )
                )
            }
        }
    }

    func makeStore(_ directory: TemporaryDirectory, device: String) throws -> OfflineStore {
        try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: device,
                keyProvider: FileKeyProvider(directory: directory.keysURL)
            )
        )
    }

    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], pushBatchSize: 3, pullPageSize: 2, retriesAutomatically: false)
        )
    }

    @Test func offlineSessionThenReconnectDeliversEveryWriteOnce() async throws {
        try await withServer { url, token in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeStore(dirA, device: "d-1")
            let live = URLSessionTransport(baseURL: url, timeout: 10) { token("d-1") }
            #expect(await live.health())
            let switchable = SwitchableTransport(live)
            switchable.offline = true
            let engineA = engine(storeA, switchable)

            for i in 0..<7 {
                try storeA.create(FieldTask(id: "task-\(i)", teamId: "team-1", title: "Task \(i)", taskKind: .inspection, revision: 0))
                if i % 3 == 0 {
                    guard case .failed(.network, let retryAt) = await engineA.syncNow() else {
                        Issue.record("an offline sync must fail with a network error")
                        return
                    }
                    #expect(retryAt != nil)
                }
            }
            try storeA.patch(FieldTask.self, id: "task-1", [.title("Task one")])
            let offlineStatus = await engineA.currentStatus
            #expect(offlineStatus.connectivity == .offline)
            #expect(offlineStatus.pending == 8)

            switchable.offline = false
            let result = await engineA.syncNow()
            guard case .succeeded(let pushed, _) = result else {
                Issue.record("sync after reconnecting: \(result)")
                return
            }
            #expect(pushed == 8)
            #expect(await engineA.currentStatus.pending == 0)
            // A second sync pushes nothing again.
            guard case .succeeded(0, _) = await engineA.syncNow() else { Issue.record("second sync pushed again"); return }

            // A second device sees every task exactly once.
            let storeB = try makeStore(dirB, device: "d-2")
            let engineB = engine(storeB, URLSessionTransport(baseURL: url) { token("d-2") })
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B sync failed"); return }
            let tasks = try storeB.all(FieldTask.self)
            #expect(tasks.count == 7)
            #expect(Set(tasks.map(\.id)).count == 7)
            #expect(try storeB.fetch(FieldTask.self, id: "task-1")?.title == "Task one")
            #expect(await engineB.currentStatus.freshness["team"] != nil)
        }
    }

    @Test func versionCheckConflict() async throws {
        try await withServer { url, token in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeStore(dirA, device: "d-1"), storeB = try makeStore(dirB, device: "d-2")
            let engineA = engine(storeA, URLSessionTransport(baseURL: url) { token("d-1") })
            let engineB = engine(storeB, URLSessionTransport(baseURL: url) { token("d-2") })

            try storeA.create(FieldTask(id: "task-c", teamId: "team-1", title: "Original", taskKind: .repair, revision: 0))
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's first sync"); return }
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }

            try storeB.patch(FieldTask.self, id: "task-c", [.title("From B")])
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's push"); return }

            try storeA.patch(FieldTask.self, id: "task-c", [.title("From A")])
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's push"); return }
            let conflicts = try storeA.conflicts()
            #expect(conflicts.count == 1)
            #expect(conflicts.first?.rowId == "task-c")
            #expect(await engineA.currentStatus.conflicts == 1)
        }
    }
}

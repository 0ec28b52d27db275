import ContractRuntime
import Foundation
import GRDB
import InspectionContracts
import InspectionServer
import OutpostTestSupport
import SyncClient
import SyncServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A sync server running the inspection app alone (no sample app, no sample contract), on a
/// loopback port for the duration of ``run(on:_:)``. Inspectors `inspector-a` and `inspector-b`
/// of tenant `acme` are members of the crew `crew-1`.
struct InspectionServerHarness: Sendable {
    static let tenant = "acme"
    static let crew = "crew-1"
    static let inspectors = ["inspector-a", "inspector-b"]
    static let secret = Data(repeating: 9, count: 32)

    let url: URL
    let signer: TokenSigner
    let storage: any SyncStorage

    /// A token of `user` on `device`, member of the crew; an admin token (the office) when `isAdmin`.
    func token(user: String, device: String, isAdmin: Bool = false) -> String {
        signer.token(tenant: Self.tenant, user: user, device: device, teams: [Self.crew], isAdmin: isAdmin)
    }

    /// A transport for `device` of `user`, talking to this server.
    func transport(user: String, device: String) -> URLSessionTransport {
        URLSessionTransport(baseURL: url, timeout: 10) { [self] in token(user: user, device: device) }
    }

    /// The inspection as the server stores it, server-only fields and metadata included.
    func storedInspection(_ id: String) async throws -> StoredRow? {
        try await storage.read { try await $0.row(in: ContractTable(Inspection.descriptor), tenant: Self.tenant, id: id) }
    }

    /// A request the devices do not make (the office's, a raw pull), with `token`; answers the
    /// status and the body. Through URLSession, which opens a connection again when the server
    /// closed an idle one (a loaded machine may take longer than its idle timeout between two).
    func send(_ method: String, _ path: String, token: String, body: String? = nil) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: path, relativeTo: url)!)
        request.httpMethod = method
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// Starts the server on a fresh database of `kind` (the example's contracts on the storages
    /// the engine's suites run on), runs `body` with it, then stops it.
    static func run(on kind: StorageKind, _ body: @Sendable (InspectionServerHarness) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inspection-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let storage = try await kind.makeStorage(in: folder, contracts: ContractRegistry.self)
        // The server authorizes a crew's scope by the memberships it holds, not by the token alone.
        for inspector in inspectors {
            _ = try await storage.write { try await $0.setTeamMembership(tenant: tenant, team: crew, userID: inspector, isMember: true) }
        }
        let signer = try TokenSigner(secret: secret)
        let environment = ServerEnvironment(
            storage: storage, signer: signer,
            apps: [InspectionServerApp()]
        )
        try await LoopbackServer.run(environment: environment) { server in
            try await body(InspectionServerHarness(url: server.url, signer: signer, storage: storage))
        }
    }
}

/// An inspector's device: its own store on a real SQLite file, its own manual clock, and a sync
/// engine for the crew's scope. The folder goes with the value.
final class InspectorDevice: Sendable {
    private let directory: TemporaryDirectory
    let clock: ManualClock
    let store: OfflineStore
    let engine: SyncEngine

    convenience init(_ server: InspectionServerHarness, user: String, device: String, clock: ManualClock) throws {
        try self.init(transport: server.transport(user: user, device: device), user: user, device: device, clock: clock)
    }

    /// A device syncing the crew's scope through `transport`.
    init(transport: URLSessionTransport, user: String, device: String, clock: ManualClock) throws {
        let directory = try TemporaryDirectory(prefix: "inspector-\(device)")
        let folder = directory.url
        self.directory = directory
        self.clock = clock
        store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: InspectionServerHarness.tenant, userId: user,
                deviceId: device, keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)),
                clock: clock
            ),
            contracts: ContractRegistry.self
        )
        engine = SyncEngine(
            store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: ["crew"], retriesAutomatically: false)
        )
    }

    deinit {
        // Closed before the folder goes (the properties are released after this).
        try? store.close()
    }

    /// The columns of a table of the device's database file, read outside the store.
    func columns(of table: String) throws -> [String] {
        let database = try DatabaseQueue(path: directory.url.appendingPathComponent("store.sqlite").path)
        defer { try? database.close() }
        return try database.read { db in try String.fetchAll(db, sql: #"SELECT "name" FROM pragma_table_info(?)"#, arguments: [table]) }
    }

    /// Pushes and pulls once; records an issue unless the sync succeeded.
    func sync(sourceLocation: SourceLocation = #_sourceLocation) async {
        let result = await engine.syncNow()
        guard case .succeeded = result else {
            Issue.record("sync failed: \(result)", sourceLocation: sourceLocation)
            return
        }
    }
}

import ContractRuntime
import Foundation
import GRDB
import HummingbirdTesting
import InspectionContracts
import InspectionServer
import SyncClient
import SyncServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The storages the example runs on: the server's embedded SQLite, and PostgreSQL from
/// `OUTPOST_TEST_POSTGRES_URL` (which `make test` sets, on a throwaway PostgreSQL 15). Without
/// it the PostgreSQL case fails and says how to get one, as the engine's own suites do.
enum InspectionStorage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    struct MissingPostgres: Error, CustomStringConvertible {
        var description: String {
            "no PostgreSQL for the tests: OUTPOST_TEST_POSTGRES_URL is not set. Run `make test`, or "
                + "`scripts/with-postgres.sh --fast -- swift test --skip-build --filter InspectionTests`"
        }
    }

    /// A fresh, migrated storage holding the example's contracts: SQLite in `folder`, PostgreSQL
    /// in a schema of its own.
    func makeStorage(in folder: URL) async throws -> any SyncStorage {
        switch self {
        case .sqlite:
            return try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        case .postgres:
            guard let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty else { throw MissingPostgres() }
            var configuration = try PostgresStorage.Configuration(url: url)
            configuration.schema = "inspections_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            configuration.auditKey = try AuditKey(bytes: Data(repeating: 5, count: 32))
            return try await PostgresStorage(configuration: configuration, contracts: ContractRegistry.self)
        }
    }
}

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
        let now = Int64(Date().timeIntervalSince1970)
        return signer.sign(
            DeviceIdentity(
                tenant: Self.tenant, userID: user, deviceID: device, teams: [Self.crew], isAdmin: isAdmin, expiresAt: now + 3600
            ),
            issuedAt: now
        )
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

    /// Starts the server on a fresh database of `kind`, runs `body` with it, then stops it.
    static func run(on kind: InspectionStorage, _ body: @Sendable (InspectionServerHarness) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inspection-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let storage = try await kind.makeStorage(in: folder)
        // The server authorizes a crew's scope by the memberships it holds, not by the token alone.
        for inspector in inspectors {
            _ = try await storage.write { try await $0.setTeamMembership(tenant: tenant, team: crew, userID: inspector, isMember: true) }
        }
        let signer = try TokenSigner(secret: secret)
        let environment = ServerEnvironment(
            storage: storage, assets: AssetStore(directory: folder.appendingPathComponent("assets")), signer: signer,
            apps: [InspectionServerApp()]
        )
        let app = buildApplication(configuration: ServerConfiguration(port: 0, rateLimit: nil), environment: environment)
        try await app.test(.live) { client in
            let server = InspectionServerHarness(url: URL(string: "http://127.0.0.1:\(client.port!)")!, signer: signer, storage: storage)
            try await body(server)
        }
    }
}

/// An inspector's device: its own store on a real SQLite file, its own manual clock, and a sync
/// engine for the crew's scope. The folder goes with the value.
final class InspectorDevice: Sendable {
    let folder: URL
    let clock: ManualClock
    let store: OfflineStore
    let engine: SyncEngine

    init(_ server: InspectionServerHarness, user: String, device: String, clock: ManualClock) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("inspector-\(device)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
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
            store: store, transport: server.transport(user: user, device: device),
            configuration: SyncEngineConfiguration(scopes: ["crew"], retriesAutomatically: false)
        )
    }

    deinit {
        try? store.close()
        try? FileManager.default.removeItem(at: folder)
    }

    /// The columns of a table of the device's database file, read outside the store.
    func columns(of table: String) throws -> [String] {
        let database = try DatabaseQueue(path: folder.appendingPathComponent("store.sqlite").path)
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

import ContractRuntime
import Contracts
import Foundation
import LearningServer
import SampleServerApps
import SyncProtocol
import SyncServer

/// A real `sync-server` deployment for the `load` and `live` benchmarks: one data folder (asset
/// files, token key, audit key), its database (the folder's SQLite, or a fresh schema of the
/// PostgreSQL `make bench` starts), and 1 or 2 `serve` processes (release build, next to
/// `outpost-bench`) on it, each on a free port of 127.0.0.1. Devices are split across the ports.
final class LoadDeployment: @unchecked Sendable {
    enum Database: Sendable, CustomStringConvertible {
        case sqlite
        /// The server the URL names; a fresh schema per deployment.
        case postgres(url: String)

        var description: String {
            switch self {
            case .sqlite: "SQLite"
            case .postgres: "PostgreSQL"
            }
        }
    }

    static let tenant = "load"
    /// Every token and the servers' audit log use this key (written to the data folder), so the
    /// in-process checks and `sync-server audit verify` read what the servers wrote.
    static let auditKeyBytes = Data((0..<32).map { UInt8(7 + $0) })

    let database: Database
    let data: URL
    let logs: URL
    let executable: URL
    /// The PostgreSQL URL with this deployment's schema; `nil` on SQLite.
    let postgresURL: String?
    let signer: TokenSigner
    private(set) var servers: [ChildProcess] = []
    private(set) var ports: [Int] = []

    /// The connections each server keeps to PostgreSQL (`max_connections` of its URL), for a
    /// run that sizes the pool; the server's default when unset.
    static let poolVariable = "OUTPOST_BENCH_POOL"

    init(database: Database, folder: URL) throws {
        self.database = database
        executable = try siblingExecutable("sync-server")
        data = folder.appendingPathComponent("data", isDirectory: true)
        logs = folder
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Self.auditKeyBytes.write(to: data.appendingPathComponent(AuditKey.fileName))
        signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
        switch database {
        case .sqlite:
            postgresURL = nil
        case .postgres(let url):
            // Each server's pool: the server's default unless `OUTPOST_BENCH_POOL` names a size.
            let pool = ProcessInfo.processInfo.environment[Self.poolVariable].flatMap(Int.init)
            postgresURL = PostgresBenchmark.url(
                try PostgresStorage.Configuration(url: url), schema: PostgresBenchmark.schemaName(), maximumConnections: pool)
        }
    }

    /// `--data DIR` and, on PostgreSQL, `--postgres URL`: the storage flags every command takes.
    var storageArguments: [String] {
        ["--data", data.path] + (postgresURL.map { ["--postgres", $0] } ?? [])
    }

    /// The storage in this process, on the same database the servers use.
    func openStorage() async throws -> any SyncStorage {
        let key = try AuditKey(bytes: Self.auditKeyBytes)
        if let postgresURL {
            var configuration = try PostgresStorage.Configuration(url: postgresURL)
            configuration.auditKey = key
            configuration.maximumConnections = 4
            return try await PostgresStorage(configuration: configuration, contracts: ContractRegistry.self)
        }
        return try SQLiteStorage(directory: data, contracts: ContractRegistry.self, auditKey: key)
    }

    func close(_ storage: any SyncStorage) async {
        if let postgres = storage as? PostgresStorage { await postgres.close() }
    }

    /// Runs a `sync-server` command to its end (seed, audit verify); its standard output.
    @discardableResult
    func command(_ arguments: [String], name: String) throws -> String {
        let child = try ChildProcess(executable, arguments, logs: logs, name: name, environment: ["OUTPOST_POSTGRES_URL": ""])
        try child.waitForSuccess()
        return child.output
    }

    /// Starts `processes` servers with the flags every configuration shares plus `extra`.
    func start(processes: Int, extra: [String] = []) throws {
        for index in 0..<processes {
            let server = try ChildProcess(
                executable,
                ["serve"] + storageArguments + ["--port", "0", "--housekeeping-interval", "off"] + extra,
                logs: logs, name: "server-\(index)",
                // Info would log a line per request: thousands a second, costing the CPU measured.
                environment: ["LOG_LEVEL": "warning", "OUTPOST_POSTGRES_URL": ""]
            )
            servers.append(server)
            let line = try server.waitForLine(containing: "listening on http://", timeout: 120)
            guard let address = line.range(of: "http://127.0.0.1:"), let port = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
                throw BenchmarkError("cannot read the port in sync-server's line '\(line)'")
            }
            ports.append(port)
        }
    }

    func stop() {
        for server in servers { server.stop() }
    }

    /// A device token (signed with the servers' key), valid for a day.
    func token(user: String, device: String, teams: [String]) -> String {
        signer.sign(
            DeviceIdentity(
                tenant: Self.tenant, userID: user, deviceID: device, teams: teams, expiresAt: Int64(Date().timeIntervalSince1970) + 86_400
            ))
    }

    /// `sync-server audit verify`: its line, and whether it exited 0.
    func verifyAudit() -> (intact: Bool, message: String) {
        do {
            let output = try command(["audit", "verify"] + storageArguments, name: "audit-verify")
            return (true, output.split(separator: "\n").first.map(String.init) ?? output)
        } catch {
            return (false, "\(error)")
        }
    }
}

/// The content every load device reads, written before the servers start: the sample content
/// and asset files (`sync-server seed`), each team's membership and a backlog of `Task` rows in
/// each team's scope, and a larger asset file for ranged downloads.
enum LoadSeed {
    /// The asset whose file the devices read ranges of (a seeded `Asset` row, its file replaced).
    static let rangedAsset = "asset-battery-briefing"
    static let rangedAssetBytes = 4 * 1024 * 1024
    /// Tasks already in each team's scope before the devices start.
    static let tasksPerTeam = 40

    static func team(_ index: Int) -> String { "team-\(index)" }

    /// Seeds `teams` teams whose members are `members(team)`, each with `tasks` Task rows, and
    /// the ranged asset's file when `rangedFile`.
    static func seed(
        _ deployment: LoadDeployment, teams: Int, tasks: Int = tasksPerTeam, rangedFile: Bool = true, members: @escaping @Sendable (Int) -> [String]
    ) throws {
        try deployment.command(["seed"] + deployment.storageArguments + ["--tenant", LoadDeployment.tenant, "--team", team(0)], name: "seed")
        try runBlocking {
            let storage = try await deployment.openStorage()
            do {
                try await storage.write { transaction in
                    for index in 0..<teams {
                        for user in members(index) + ["seeder"] {
                            try await transaction.setTeamMembership(tenant: LoadDeployment.tenant, team: team(index), userID: user, isMember: true)
                        }
                    }
                }
                let push = PushService(storage: storage, reducers: SampleServerApps.reducers)
                let seeder = DeviceIdentity(
                    tenant: LoadDeployment.tenant, userID: "seeder", deviceID: "seeder", teams: (0..<teams).map(team), expiresAt: .max
                )
                var seq: Int64 = 0
                for index in 0..<teams where tasks > 0 {
                    let mutations = (0..<tasks).map { number -> Mutation in
                        seq += 1
                        return LoadMutations.taskCreate(
                            id: "seed-\(team(index))-\(number)", team: team(index), seq: seq, clientMutationID: "seed-\(seq)")
                    }
                    let answer = try await push.push(PushRequest(clientId: "seeder", schema: [:], mutations: mutations), identity: seeder)
                    guard answer.results.allSatisfy({ $0.status == .applied }) else { throw BenchmarkError("seeding \(team(index)) was not applied") }
                }
                await deployment.close(storage)
            } catch {
                await deployment.close(storage)
                throw error
            }
        }
        guard rangedFile else { return }
        // A larger file for the ranged downloads: the seeded asset's own file is a few KiB.
        var generator = SeededGenerator(seed: 0x6c6f_6164)
        let bytes = Data((0..<rangedAssetBytes).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        try runBlocking {
            let storage = try await deployment.openStorage()
            do {
                // The admin upload route's own service: the file stored in the tenant's files, the row's file, size and checksum updated.
                let content = LearningContentService(
                    storage: storage, clock: SystemClock(), content: ContentService(storage: storage, apps: SampleServerApps.all)
                )
                let admin = DeviceIdentity(tenant: LoadDeployment.tenant, userID: "editor", deviceID: "console", isAdmin: true, expiresAt: .max)
                _ = try await content.uploadAsset(id: rangedAsset, data: bytes, contentType: "application/octet-stream", identity: admin)
                await deployment.close(storage)
            } catch {
                await deployment.close(storage)
                throw error
            }
        }
    }
}

/// The mutations the load devices push: `Task` creates in their team's scope, each with an id
/// of its own, so the exactly-once check can find every one.
enum LoadMutations {
    static func taskCreate(id: String, team: String, seq: Int64, clientMutationID: String) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: clientMutationID, entity: "Task", op: .create, id: id,
            payload: .object([
                "id": .string(id), "team_id": .string(team), "title": .string("Check scooter \(id)"), "task_kind": .string("inspection"),
                "status": .string("assigned"), "estimated_minutes": .int(Int64(10 + seq % 50)),
                "checklist": .array([.string("brakes"), .string("lights")]),
            ])
        )
    }
}

import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension SyncServerProcess {
    /// A `sync-server serve` started on a free port, signing with `secretFile`: on PostgreSQL at
    /// `postgresURL`, or on SQLite in `data` without one; `options` are added to the command.
    static func started(data: URL, postgresURL: String?, secretFile: URL, options: [String] = []) throws -> SyncServerProcess {
        let server = SyncServerProcess(
            data: data, serveOptions: ["--secret-file", secretFile.path] + (postgresURL.map { ["--postgres", $0] } ?? []) + options
        )
        try server.start()
        return server
    }

    /// A push over HTTP: the status and the decoded answer (nil unless 200).
    func push(_ request: PushRequest, token: String) async throws -> (status: Int, response: PushResponse?) {
        var http = URLRequest(url: try url.appendingPathComponent("sync/v1/push"))
        http.httpMethod = "POST"
        http.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        http.setValue("application/json", forHTTPHeaderField: "Content-Type")
        http.httpBody = try JSONEncoder().encode(request)
        http.timeoutInterval = 120
        let (data, response) = try await URLSession.shared.data(for: http)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return (status, status == 200 ? try JSONDecoder().decode(PushResponse.self, from: data) : nil)
    }

    /// One pull page over HTTP.
    func pull(scope: String, cursor: String?, limit: Int, token: String) async throws -> PullResponse {
        var components = URLComponents(url: try url.appendingPathComponent("sync/v1/pull"), resolvingAgainstBaseURL: false)!
        components.queryItems =
            [URLQueryItem(name: "scope", value: scope), URLQueryItem(name: "limit", value: String(limit))]
            + (cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
        var http = URLRequest(url: components.url!)
        http.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        http.timeoutInterval = 120
        let (data, response) = try await URLSession.shared.data(for: http)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw Failure("pull answered \((response as? HTTPURLResponse)?.statusCode ?? 0): \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(PullResponse.self, from: data)
    }
}

/// Several `sync-server` processes on one PostgreSQL schema, sharing a data folder (assets)
/// and a token key, as behind a load balancer.
struct ServerCluster {
    static let secret = Data(repeating: 9, count: 32)

    private let directory: TemporaryDirectory
    let schema = StorageKind.uniqueSchema()
    let postgresURL: String
    let servers: [SyncServerProcess]
    let probe: PostgresProbe
    let signer: TokenSigner

    init(processes: Int) throws {
        directory = try TemporaryDirectory(prefix: "sync-cluster")
        let secretFile = directory.url.appendingPathComponent("token.secret")
        try Self.secret.write(to: secretFile)
        guard var components = URLComponents(string: try StorageKind.postgresURL()) else { throw StorageKind.MissingPostgres() }
        components.queryItems =
            (components.queryItems ?? []).filter { $0.name != "schema" && $0.name != "max_connections" }
            + [URLQueryItem(name: "schema", value: schema), URLQueryItem(name: "max_connections", value: "8")]
        postgresURL = components.string!
        let data = directory.url.appendingPathComponent("data"), url = postgresURL
        // One after the other: the first applies the migrations (the others would wait for its lock anyway).
        servers = try (0..<processes).map { _ in try SyncServerProcess.started(data: data, postgresURL: url, secretFile: secretFile) }
        probe = try PostgresProbe(schema: schema)
        signer = try TokenSigner(secret: Self.secret)
    }

    /// A token; its teams are recorded as memberships on the server first (which authorizes by them).
    func token(user: String, device: String, teams: [String] = ["red"]) async throws -> String {
        for team in teams {
            _ = try await probe.client.query(
                "INSERT INTO team_members (tenant, team_id, user_id) VALUES ('acme', \(team), \(user)) ON CONFLICT DO NOTHING"
            ).collect()
        }
        return signer.token(tenant: "acme", user: user, device: device, teams: teams)
    }

    /// Stops the processes; the folder goes with the cluster.
    func stop() {
        for server in servers { try? server.stop() }
    }

    /// `sync-server audit verify` against the cluster's database.
    func auditVerify() throws -> CommandResult {
        try SyncServerCommand.run(["audit", "verify", "--data", directory.url.appendingPathComponent("data").path, "--postgres", postgresURL])
    }
}

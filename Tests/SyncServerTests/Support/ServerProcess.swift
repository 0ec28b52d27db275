import Foundation
import SyncProtocol
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@testable import SyncServer

/// A real `sync-server serve` process (the built binary) on loopback, stopped with SIGTERM.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let baseURL: URL
    private let output = Pipe()

    /// Starts `sync-server serve` on a free port and waits until it listens: on PostgreSQL at
    /// `postgresURL`, or on SQLite in `data` without one; `arguments` are added to the command.
    init(data: URL, postgresURL: String?, secretFile: URL, arguments: [String] = []) throws {
        process.executableURL = try CLITests.binary()
        process.arguments = ["serve", "--data", data.path, "--port", "0", "--secret-file", secretFile.path, "--rate", "0"]
            + (postgresURL.map { ["--postgres", $0] } ?? []) + arguments
        var environment = ProcessInfo.processInfo.environment
        environment[TokenKey.environmentVariable] = nil
        environment[PostgresStorage.environmentVariable] = nil
        process.environment = environment
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // Its line names the port: "sync-server listening on http://127.0.0.1:PORT (…)".
        var text = ""
        let deadline = Date().addingTimeInterval(60)
        while !(text.contains("sync-server listening on") && text.hasSuffix("\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty || Date() > deadline {
                Self.stop(process)
                throw ServerProcessError("sync-server did not start: \(text)")
            }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: #"listening on http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression),
            let url = URL(string: String(text[range].dropFirst("listening on ".count)))
        else {
            Self.stop(process)
            throw ServerProcessError("sync-server said: \(text)")
        }
        baseURL = url
        // Keep reading what it writes, so a full pipe never stalls it.
        output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
    }

    func stop() { Self.stop(process) }

    /// A line of the process's `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
    func memoryKiB(_ field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
        else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }

    /// Resets the process's peak resident size (`VmHWM`) to its current one; false where the
    /// kernel does not allow it.
    func resetPeakMemory() -> Bool {
        (try? "5".write(toFile: "/proc/\(process.processIdentifier)/clear_refs", atomically: false, encoding: .utf8)) != nil
    }

    private static func stop(_ process: Process) {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { stop() }

    struct ServerProcessError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A push over HTTP: the status and the decoded answer (nil unless 200).
    func push(_ request: PushRequest, token: String) async throws -> (status: Int, response: PushResponse?) {
        var http = URLRequest(url: baseURL.appendingPathComponent("sync/v1/push"))
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
        var components = URLComponents(url: baseURL.appendingPathComponent("sync/v1/pull"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "scope", value: scope), URLQueryItem(name: "limit", value: String(limit))]
            + (cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
        var http = URLRequest(url: components.url!)
        http.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        http.timeoutInterval = 120
        let (data, response) = try await URLSession.shared.data(for: http)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw ServerProcessError("pull answered \((response as? HTTPURLResponse)?.statusCode ?? 0): \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(PullResponse.self, from: data)
    }
}

/// Several `sync-server` processes on one PostgreSQL schema, sharing a data folder (assets)
/// and a token key, as behind a load balancer.
struct ServerCluster {
    static let secret = Data(repeating: 9, count: 32)

    let folder: URL
    let schema = StorageKind.uniqueSchema()
    let postgresURL: String
    let servers: [ServerProcess]
    let probe: PostgresProbe
    let signer: TokenSigner

    init(processes: Int) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let secretFile = folder.appendingPathComponent("token.secret")
        try Self.secret.write(to: secretFile)
        guard let base = ProcessInfo.processInfo.environment[StorageKind.postgresVariable], !base.isEmpty,
            var components = URLComponents(string: base)
        else { throw StorageKind.MissingPostgres() }
        components.queryItems = (components.queryItems ?? []).filter { $0.name != "schema" && $0.name != "max_connections" }
            + [URLQueryItem(name: "schema", value: schema), URLQueryItem(name: "max_connections", value: "8")]
        postgresURL = components.string!
        let data = folder.appendingPathComponent("data"), url = postgresURL
        // One after the other: the first applies the migrations (the others would wait for its lock anyway).
        servers = try (0..<processes).map { _ in try ServerProcess(data: data, postgresURL: url, secretFile: secretFile) }
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
        return signer.sign(DeviceIdentity(tenant: "acme", userID: user, deviceID: device, teams: teams, expiresAt: Int64(Date().timeIntervalSince1970) + 3600))
    }

    func stop() {
        for server in servers { server.stop() }
        try? FileManager.default.removeItem(at: folder)
    }

    /// `sync-server audit verify` against the cluster's database.
    func auditVerify() throws -> CLITests.Run {
        try CLITests.run(["audit", "verify", "--data", folder.appendingPathComponent("data").path, "--postgres", postgresURL])
    }
}

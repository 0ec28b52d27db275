import ContractRuntime
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Sinks across crashes: a real `sync-server` killed with SIGKILL again and again while it
/// delivers to a real receiver process (`scripts/sink-receiver.py`, which deduplicates by
/// `Idempotency-Key` and checks every xAPI statement with the PyPI `tincan` library).
@Suite("Sinks survive kill -9: a real server and a real receiver", .serialized, .blockingWork)
struct SinkProcessTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let webhookSecret = "the-webhook-secret-of-the-crash-test"

    /// The receiver, started on a free port; its port.
    static func startReceiver(in folder: URL) throws -> (ChildProcess, Int) {
        let secretFile = folder.appendingPathComponent("receiver.secret"), portFile = folder.appendingPathComponent("receiver.port")
        try Data(webhookSecret.utf8).write(to: secretFile)
        let receiver = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", repository.appendingPathComponent("scripts/sink-receiver.py").path, "--port", "0", "--port-file", portFile.path,
                "--store", folder.appendingPathComponent("receiver").path, "--secret-file", secretFile.path, "--xapi-user", "lrs",
                "--xapi-password", "lrs-password",
            ])
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return (receiver, port)
            }
            guard receiver.isRunning else { break }
            usleep(50_000)
        }
        receiver.signal(SIGKILL)
        throw SyncServerProcess.Failure("the receiver did not start:\n\(receiver.stdout)\(receiver.stderr)")
    }

    static func getJSON(_ url: String, token: String? = nil) async throws -> Any {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 30)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONSerialization.jsonObject(with: data)
    }

    static func task(_ seq: Int64, _ id: String) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(seq)", entity: "Task", op: .create, id: id,
            payload: .object([
                "id": .string(id), "team_id": .string("red"), "title": .string("Swap \(id)"), "task_kind": .string("battery_swap"),
                "status": .string("assigned"),
            ]))
    }

    static func statement(_ seq: Int64, _ id: String) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(seq)", entity: "Statement", op: .create, id: id,
            payload: .object([
                "id": .string(id), "verb": .string(seq % 2 == 0 ? "completed" : "attempted"), "object_id": .string("lesson-\(seq)"),
                "score": .double(0.75), "success": .bool(true), "duration_ms": .int(61_000), "stated_at": .string("2026-11-27T08:00:00.000Z"),
            ]))
    }

    @Test(
        "kill -9 of the server at random points while it delivers loses nothing, and the deduplicating receiver sees each change once, in order per row; every xAPI statement passes tincan",
        arguments: StorageKind.allCases)
    func crashesLoseNothing(_ kind: StorageKind) async throws {
        let folder = try TemporaryDirectory(prefix: "sink-crash")
        let (receiver, receiverPort) = try Self.startReceiver(in: folder.url)
        defer { receiver.signal(SIGTERM) }
        let tokenSecret = folder.url.appendingPathComponent("token.secret")
        try Data(repeating: 9, count: 32).write(to: tokenSecret)
        let signer = try TokenSigner(secret: Data(repeating: 9, count: 32))
        var postgres: [String] = []
        if kind == .postgres {
            guard var components = URLComponents(string: try StorageKind.postgresURL()) else { throw StorageKind.MissingPostgres() }
            components.queryItems =
                (components.queryItems ?? []).filter { $0.name != "schema" } + [URLQueryItem(name: "schema", value: StorageKind.uniqueSchema())]
            postgres = ["--postgres", components.string!]
        }
        let data = folder.url.appendingPathComponent("data")
        let server = try SyncServerProcess.started(
            data: data, postgresURL: postgres.last, secretFile: tokenSecret, options: ["--sink-lease", "2", "--outbound-allow", "127.0.0.1/32"])
        defer { try? server.crash() }
        let cli = ["--data", data.path] + postgres
        func run(_ arguments: [String]) throws {
            let result = try SyncServerCommand.run(arguments)
            #expect(result.status == 0, "\(result)")
        }
        try run(["teams", "add"] + cli + ["--tenant", "acme", "--team", "red", "--user", "alice"])
        let secretFile = folder.url.appendingPathComponent("sink.secret"), passwordFile = folder.url.appendingPathComponent("lrs.password")
        try Data(Self.webhookSecret.utf8).write(to: secretFile)
        try Data("lrs-password\n".utf8).write(to: passwordFile)
        let base = "http://127.0.0.1:\(receiverPort)"
        try run(
            ["sinks", "add"] + cli + [
                "--outbound-allow", "127.0.0.1", "--tenant", "acme", "--id", "hooks", "--url", base + "/hooks", "--secret-file", secretFile.path,
            ])
        try run(
            ["sinks", "add"] + cli + [
                "--outbound-allow", "127.0.0.1", "--tenant", "acme", "--id", "lrs", "--kind", "xapi", "--url", base + "/xAPI", "--secret-file",
                secretFile.path,
                "--setting", "user=lrs", "--setting-file", "password=" + passwordFile.path, "--setting", "home_page=https://learn.example.com",
            ])

        let token = signer.token(tenant: "acme", user: "alice", device: "alice-phone", teams: ["red"], lifetime: 3600)
        var seq: Int64 = 0, crashes = 0, statements = 0
        var generator = SystemRandomNumberGenerator()
        for round in 0..<14 {
            var mutations: [Mutation] = []
            for index in 0..<4 {
                seq += 1
                mutations.append(Self.task(seq, "task-\(round)-\(index)"))
            }
            if round > 0 {
                // A row changed again: its changes must arrive in order.
                seq += 1
                mutations.append(
                    Mutation(
                        seq: seq, clientMutationId: "cm-\(seq)", entity: "Task", op: .patch, id: "task-\(round - 1)-0",
                        payload: .object(["status": .string("in_progress")]), baseVersion: 1))
            }
            for _ in 0..<2 {
                seq += 1
                statements += 1
                mutations.append(Self.statement(seq, String(format: "01JD%022d", seq)))
            }
            let pushed = try await server.push(PushRequest(clientId: "alice-phone", schema: [:], mutations: mutations), token: token)
            #expect(
                pushed.status == 200 && pushed.response?.results.allSatisfy { $0.status == .applied } == true,
                "\(String(describing: pushed.response))")
            if round % 3 != 2 {
                // Killed somewhere in the delivery of what was just applied: before the batch is
                // recorded, after it, while it is sent, or after the receiver answered.
                usleep(UInt32.random(in: 0...40_000, using: &generator))
                try server.crash()
                crashes += 1
                try server.start()
            }
        }
        #expect(crashes >= 9)

        // What the server's feed holds at the end: every row at its latest version.
        let admin = signer.token(tenant: "acme", user: "admin", device: "console", isAdmin: true)
        let feed = try #require(
            try await Self.getJSON("\(try server.url)/admin/v1/changes?contracts=Task&limit=1000", token: admin) as? [String: Any])
        let latest = try #require(feed["changes"] as? [[String: Any]]).map { "\($0["id"] ?? "")@\($0["version"] ?? "")" }
        #expect(latest.count == 14 * 4)

        let expectedStatements = statements
        await eventually("the receiver has every change and every statement", within: 120) {
            guard let changes = try? await Self.getJSON(base + "/changes") as? [[String: Any]] else { return false }
            let received = Set(changes.map { "\($0["id"] ?? "")@\($0["version"] ?? "")" })
            return latest.allSatisfy(received.contains) && Self.storedStatements(folder.url) >= expectedStatements
        }
        let changes = try #require(try await Self.getJSON(base + "/changes") as? [[String: Any]])
        let cursors = changes.compactMap { $0["cursor"] as? String }
        #expect(
            cursors.count == changes.count && Set(cursors).count == cursors.count,
            "each change once: the receiver deduplicated every batch sent again")
        var versions: [String: Int] = [:]
        for change in changes {
            guard let id = change["id"] as? String, let version = change["version"] as? Int else { continue }
            #expect(version > versions[id, default: 0], "\(id) arrived out of order")
            versions[id] = version
        }
        let stats = try #require(try await Self.getJSON(base + "/stats") as? [String: Any])
        #expect(stats["bad_signatures"] as? Int == 0 && stats["invalid_statements"] as? Int == 0, "\(stats)")
        #expect(Self.storedStatements(folder.url) == statements, "every Statement became one xAPI statement tincan accepted")
        let sinks = try SyncServerCommand.run(["sinks", "list"] + cli + ["--tenant", "acme"])
        #expect(sinks.status == 0 && sinks.stdout.contains("\"id\":\"hooks\"") && !sinks.stdout.contains(Self.webhookSecret))
    }

    /// Statements the receiver stored (its file survives its counters).
    static func storedStatements(_ folder: URL) -> Int {
        let text = (try? String(contentsOf: folder.appendingPathComponent("receiver/statements.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").count
    }
}

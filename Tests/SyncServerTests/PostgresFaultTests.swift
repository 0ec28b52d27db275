import ContractRuntime
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Two real `sync-server` processes on a PostgreSQL of their own, under load from several
/// devices, while the database is restarted, stopped for a while and has its connections cut
/// (docs/scaling.md, "When PostgreSQL goes away"). The servers answer 503
/// `storage_unavailable` with `Retry-After` while it is gone, within their connection wait, never
/// hang, never crash, recover by themselves; at the end every accepted mutation is stored once
/// and the audit chain verifies.
///
/// `make test` runs the short version (a 6 s outage); `OUTPOST_FAULT_OUTAGE_SECONDS=30` (what
/// `make soak` sets) the long one.
@Suite("PostgreSQL faults under load", .serialized, .blockingWork)
struct PostgresFaultTests {
    static let secret = Data(repeating: 7, count: 32)
    static let devices = 4
    static let batch = 20
    /// The servers' connection wait (`connect_wait`), and how much longer any answer may take.
    static let connectWait = 2.0
    static let answerSlack = 8.0

    /// A cluster of the test's own (scripts/postgres-cluster.sh): the shared one serves the other tests.
    final class OwnPostgres: Sendable {
        let folder: URL
        let url: String
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/postgres-cluster.sh")

        init() throws {
            // Directly under the system's temporary folder: PostgreSQL runs as another user when the tests run as root.
            folder = URL(fileURLWithPath: "/tmp").appendingPathComponent("outpost-fault-pg-\(UUID().uuidString.prefix(8))")
            url = try Self.run(["start", folder.path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @discardableResult
        static func run(_ arguments: [String]) throws -> CommandResult {
            let result = try ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), [script.path] + arguments, timeout: 120)
            guard result.status == 0 else { throw SyncServerProcess.Failure("postgres-cluster.sh \(arguments.joined(separator: " ")): \(result)") }
            return result
        }

        func start() throws { try Self.run(["start", folder.path]) }
        func stop(_ mode: String = "fast") throws { try Self.run(["stop", folder.path, mode]) }
        func remove() { _ = try? Self.run(["remove", folder.path]) }

        /// Runs SQL with psql (the servers' sessions are what it ends).
        func sql(_ statement: String) throws -> String {
            try ChildProcess.run(tool: "psql", [url, "-At", "-c", statement]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// What the devices saw.
    actor Tally {
        var accepted: [String: Set<String>] = [:]
        var unavailable = 0
        var missingRetryAfter = 0
        var unexpected: [String] = []
        var slowest = 0.0
        var pulls = 0

        func answered(_ status: Int, retryAfter: String?, code: String?, seconds: Double) {
            slowest = max(slowest, seconds)
            if status == 503 {
                unavailable += 1
                if retryAfter == nil { missingRetryAfter += 1 }
                if code != "storage_unavailable" { unexpected.append("503 \(code ?? "?")") }
            } else if status != 200 {
                unexpected.append("\(status) \(code ?? "?")")
            }
        }

        func accept(_ ids: [String], device: String) { accepted[device, default: []].formUnion(ids) }
        func pulled() { pulls += 1 }
    }

    struct Answer {
        var status: Int
        var retryAfter: String?
        var code: String?
        var data: Data
        var seconds: Double
    }

    static func send(_ request: URLRequest) async -> Answer {
        let started = Date()
        do {
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = response as? HTTPURLResponse
            let code = (try? JSONDecoder().decode(ErrorBody.self, from: data))?.error.code.rawValue
            return Answer(
                status: http?.statusCode ?? 0, retryAfter: http?.value(forHTTPHeaderField: "Retry-After"), code: code, data: data,
                seconds: Date().timeIntervalSince(started))
        } catch {
            // The connection itself failed (the server went away): a hang would show as the timeout.
            return Answer(status: -1, code: "\(error)", data: Data(), seconds: Date().timeIntervalSince(started))
        }
    }

    @Test("restarted, stopped and cut off under load: 503 with Retry-After meanwhile, recovery by itself, every accepted mutation stored once")
    func outagesUnderLoad() async throws {
        let outage = Double(ProcessInfo.processInfo.environment["OUTPOST_FAULT_OUTAGE_SECONDS"] ?? "") ?? 6
        let postgres = try OwnPostgres()
        defer { postgres.remove() }
        let directory = try TemporaryDirectory(prefix: "fault")
        let secretFile = directory.url.appendingPathComponent("token.secret")
        try Self.secret.write(to: secretFile)
        let databaseURL = postgres.url + "?max_connections=4&connect_wait=\(Self.connectWait)"
        let data = directory.url.appendingPathComponent("data")
        let servers = try (0..<2).map { _ in try SyncServerProcess.started(data: data, postgresURL: databaseURL, secretFile: secretFile) }
        defer { for server in servers { try? server.stop() } }
        let signer = try TokenSigner(secret: Self.secret)
        for device in 0..<Self.devices {
            _ = try postgres.sql(
                "INSERT INTO team_members (tenant, team_id, user_id) VALUES ('acme', 'red', 'tech-\(device)') ON CONFLICT DO NOTHING")
        }
        let urls = try servers.map { try $0.url }

        let tally = Tally()
        let running = RunningFlag()
        let giveUp = Date().addingTimeInterval(outage + 150)
        let load = (0..<Self.devices).map { device in
            Task {
                let token = signer.token(tenant: "acme", user: "tech-\(device)", device: "tablet-\(device)", teams: ["red"])
                var seq: Int64 = 0
                var round = 0
                while running.value {
                    // One push of new tasks, sent until it is answered 200 (a 503 is retried as is).
                    let ids = (0..<Self.batch).map { "d\(device)-t\(seq + Int64($0) + 1)" }
                    let mutations = ids.enumerated().map { index, id in
                        Mutation(
                            seq: seq + Int64(index) + 1, clientMutationId: "cm-\(id)", entity: "Task", op: .create, id: id,
                            payload: .object([
                                "id": .string(id), "team_id": .string("red"), "title": .string("Check \(id)"), "task_kind": .string("repair"),
                            ]))
                    }
                    let body = try JSONEncoder().encode(PushRequest(clientId: "tablet-\(device)", schema: [:], mutations: mutations))
                    while true {
                        round += 1
                        var request = URLRequest(url: urls[round % urls.count].appendingPathComponent("sync/v1/push"))
                        request.httpMethod = "POST"
                        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                        request.httpBody = body
                        request.timeoutInterval = 60
                        let answer = await Self.send(request)
                        await tally.answered(answer.status, retryAfter: answer.retryAfter, code: answer.code, seconds: answer.seconds)
                        if answer.status == 200, let response = try? JSONDecoder().decode(PushResponse.self, from: answer.data) {
                            let done = zip(ids, response.results).filter { $0.1.status == .applied || $0.1.status == .duplicate }.map(\.0)
                            await tally.accept(done, device: "tablet-\(device)")
                            break
                        }
                        guard Date() < giveUp else {
                            await tally.answered(0, retryAfter: nil, code: "never answered 200 after the database returned", seconds: 0)
                            return seq
                        }
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    seq += Int64(Self.batch)
                    // And a pull of the team scope now and then (its answer is checked like a push's).
                    if round % 3 == 0 {
                        var pull = URLRequest(url: URL(string: urls[(round + 1) % urls.count].absoluteString + "/sync/v1/pull?scope=team&limit=50")!)
                        pull.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                        pull.timeoutInterval = 60
                        let answer = await Self.send(pull)
                        await tally.answered(answer.status, retryAfter: answer.retryAfter, code: answer.code, seconds: answer.seconds)
                        if answer.status == 200 { await tally.pulled() }
                    }
                }
                return seq
            }
        }

        try await Task.sleep(for: .seconds(2))
        // A restart.
        try postgres.stop("fast")
        try postgres.start()
        try await Task.sleep(for: .seconds(2))
        // The servers' sessions cut mid-work, twice.
        for _ in 0..<2 {
            _ = try postgres.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'outpost-sync-server%'")
            try await Task.sleep(for: .seconds(1))
        }
        // An outage.
        try postgres.stop("immediate")
        try await Task.sleep(for: .seconds(outage))
        let unavailableDuringOutage = await tally.unavailable
        try postgres.start()
        try await Task.sleep(for: .seconds(3))
        running.stop()
        var sent: [String: Int64] = [:]
        for (device, task) in load.enumerated() { sent["tablet-\(device)"] = try await task.value }

        let unexpected = await tally.unexpected, slowest = await tally.slowest
        #expect(unavailableDuringOutage > 0, "the outage was answered 503")
        #expect(await tally.missingRetryAfter == 0, "every 503 says when to retry")
        #expect(unexpected.isEmpty, "only 200 and 503 storage_unavailable: \(unexpected.prefix(5))")
        if !unexpected.isEmpty {
            for server in servers {
                let lines = server.output.split(separator: "\n")
                let errors = lines.filter { $0.contains("error") || $0.contains("failure") }
                Issue.record("a server logged (\(lines.count) lines): \((errors.isEmpty ? lines : errors).suffix(8).joined(separator: "\n"))")
                if let folder = ProcessInfo.processInfo.environment["OUTPOST_FAULT_LOGS"] {
                    try? server.output.write(toFile: folder + "/server-\(try server.url.port ?? 0).log", atomically: true, encoding: .utf8)
                }
            }
        }
        #expect(slowest <= Self.connectWait + Self.answerSlack, "no request waited past the connection wait (slowest \(slowest) s)")
        #expect(await tally.pulls > 0)
        // Both servers still up and serving.
        for url in urls {
            let health = await Self.send(URLRequest(url: url.appendingPathComponent("health")))
            #expect(health.status == 200, "\(url) recovered")
        }

        // Every accepted mutation stored exactly once; each stream's last seq is what it sent.
        let accepted = await tally.accepted
        let acceptedCount = accepted.values.reduce(0) { $0 + $1.count }
        #expect(acceptedCount == Int(sent.values.reduce(0, +)))
        #expect(Int(try postgres.sql("SELECT count(*) FROM tasks")) == acceptedCount)
        for (client, last) in sent {
            #expect(Int64(try postgres.sql("SELECT last_seq FROM clients WHERE tenant = 'acme' AND client_id = '\(client)'")) == last)
        }
        #expect(Int(try postgres.sql("SELECT count(*) FROM tasks WHERE _version <> 1")) == 0, "no task applied twice")
        let verify = try SyncServerCommand.run(["audit", "verify", "--data", data.path, "--postgres", databaseURL])
        #expect(verify.status == 0, "\(verify)")
    }
}

/// A flag the load's tasks read and the test sets.
final class RunningFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = true

    var value: Bool { lock.withLock { flag } }
    func stop() { lock.withLock { flag = false } }
}

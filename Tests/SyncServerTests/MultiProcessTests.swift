import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import PostgresNIO
import SyncClient
import SyncProtocol
import Testing

@testable import SyncServer

/// Real `sync-server` processes (the built binary) on one PostgreSQL, over HTTP, as behind a
/// load balancer (docs/scaling.md).
@Suite("Several sync-server processes on one PostgreSQL", .serialized, .blockingWork)
struct MultiProcessTests {
    static func taskPayload(_ id: String) -> JSONValue {
        .object([
            "id": .string(id), "team_id": .string("red"), "title": .string("Swap battery"), "task_kind": .string("battery_swap"),
            "status": .string("assigned"),
        ])
    }

    static func statementPayload(_ id: String) -> JSONValue {
        .object([
            "id": .string(id), "verb": .string("experienced"), "object_id": .string("lesson-1"), "stated_at": .string("2026-01-01T07:00:00.000Z"),
        ])
    }

    static func create(_ seq: Int64, _ entity: String, _ id: String, _ payload: JSONValue) -> Mutation {
        Mutation(seq: seq, clientMutationId: "cm-\(id)", entity: entity, op: .create, id: id, payload: payload)
    }

    @Test("a push resent to a second process while the first is still working on it is applied once")
    func resendToAnotherProcess() async throws {
        let cluster = try ServerCluster(processes: 2)
        defer { cluster.stop() }
        let token = try await cluster.token(user: "alice", device: "alice-phone")
        let request = PushRequest(
            clientId: "alice-phone", schema: [:],
            mutations: (1...50).map { Self.create(Int64($0), "Task", "task-\($0)", Self.taskPayload("task-\($0)")) }
        )

        // Another session holds the team scope's lock, so the first process stops half way
        // through the push, holding the client's lock, until the test lets go.
        let held = Gate(), release = Gate()
        let holder = Task {
            try await cluster.probe.client.withConnection { connection in
                let logger = Logger(label: "test")
                try await connection.query("BEGIN", logger: logger)
                try await connection.query(
                    """
                    INSERT INTO scope_sequences (tenant, scope_key, last_seq) VALUES ('acme', 'ops:team:red', 0)
                    ON CONFLICT (tenant, scope_key) DO UPDATE SET last_seq = scope_sequences.last_seq
                    """, logger: logger)
                held.open()
                await release.wait()
                try await connection.query("COMMIT", logger: logger)
            }
        }
        await held.wait()
        let first = Task { try await cluster.servers[0].push(request, token: token) }
        try await cluster.probe.waitForLockWaiters(1, "the first process waits for the scope, inside its push")
        let second = Task { try await cluster.servers[1].push(request, token: token) }
        try await cluster.probe.waitForLockWaiters(2, "the resend waits for the first process's push")
        release.open()
        try await holder.value

        let one = try await first.value, two = try await second.value
        #expect(one.status == 200 && two.status == 200)
        #expect(one.response?.results.map(\.status) == Array(repeating: .applied, count: 50))
        #expect(two.response == one.response, "the resend is answered from the stored results")
        #expect(try await cluster.probe.integer("SELECT count(*) FROM tasks") == 50)
        #expect(try await cluster.probe.integer("SELECT count(*) FROM tasks WHERE _version <> 1") == 0)
        #expect(try await cluster.probe.integer("SELECT count(*) FROM push_results") == 1, "one record for the push")
        #expect(try await cluster.probe.integer("SELECT sum(last_seq - first_seq + 1)::BIGINT FROM push_results") == 50)
        #expect(try await cluster.probe.integer("SELECT count(*) FROM audit_log WHERE operation = 'push' AND row_id LIKE '%:1-50'") == 1)
        #expect(try await cluster.probe.integer("SELECT count(*) FROM audit_log") == 1, "the push audited once")
        #expect(try await cluster.probe.integer("SELECT last_seq FROM scope_sequences WHERE scope_key = 'ops:team:red'") == 50)
        let verify = try cluster.auditVerify()
        #expect(verify.status == 0 && verify.stdout.contains("audit log intact: 1 entry"), "\(verify.stdout)\(verify.stderr)")
    }

    @Test("a task pushed through one process is in the store of a device listening on the other moments later")
    func livePokeAcrossProcesses() async throws {
        let cluster = try ServerCluster(processes: 2)
        defer { cluster.stop() }
        let anaToken = try await cluster.token(user: "ana", device: "ana-tablet")
        let benToken = try await cluster.token(user: "ben", device: "ben-tablet")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-device-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("device.sqlite"), tenantId: "acme", userId: "ben", deviceId: "ben-tablet",
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys"))
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
        // Ben's tablet talks to the second process only; its timer would sync after an hour.
        let engine = SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: try cluster.servers[1].url, timeout: 10) { benToken },
            configuration: SyncEngineConfiguration(scopes: ["team"], periodicInterval: 3600)
        )
        await engine.start(connectivity: ManualConnectivityMonitor(online: true))
        await eventually("ben's live channel is open", within: 30) { await engine.currentStatus.live == .connected }

        let request = PushRequest(
            clientId: "ana-client", schema: [:], mutations: [Self.create(1, "Task", "task-live", Self.taskPayload("task-live"))])
        #expect(try await cluster.servers[0].push(request, token: anaToken).status == 200)
        await eventually("ben's tablet has the task Ana pushed through the first process", within: 30) {
            (try? store.fetch(FieldTask.self, id: "task-live")) != nil
        }
        await engine.stop()
    }

    @Test("many devices pushing to three processes at once: nothing lost, nothing applied twice, no pull skips a row")
    func manyDevicesThreeProcesses() async throws {
        let cluster = try ServerCluster(processes: 3)
        defer { cluster.stop() }
        let devices = 9, pushesPerDevice = 6, batch = 20
        let servers = cluster.servers

        // Each device pushes its batches in order, each to the next process round the ring;
        // every third batch is also delivered to another process at the same time (a retry
        // racing the original), and every batch is sent once more afterwards (a late duplicate).
        let finished = Gate()
        let pushing = Task {
            defer { finished.open() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for device in 0..<devices {
                    group.addTask {
                        let token = try await cluster.token(user: "user-\(device)", device: "device-\(device)")
                        for push in 0..<pushesPerDevice {
                            let mutations = (0..<batch).map { index -> Mutation in
                                let seq = Int64(push * batch + index + 1)
                                let id = "d\(device)-\(seq)"
                                return index % 2 == 0
                                    ? Self.create(seq, "Task", "task-\(id)", Self.taskPayload("task-\(id)"))
                                    : Self.create(seq, "Statement", "st-\(id)", Self.statementPayload("st-\(id)"))
                            }
                            let request = PushRequest(clientId: "client-\(device)", schema: [:], mutations: mutations)
                            let target = servers[(device + push) % servers.count]
                            if push % 3 == 0 {
                                async let original = target.push(request, token: token)
                                async let racing = servers[(device + push + 1) % servers.count].push(request, token: token)
                                let (a, b) = try await (original, racing)
                                #expect(a.status == 200 && b.status == 200)
                                #expect(a.response == b.response)
                            } else {
                                #expect(try await target.push(request, token: token).status == 200)
                            }
                            let late = try await servers[(device + push + 2) % servers.count].push(request, token: token)
                            #expect(late.response?.results.allSatisfy { $0.status == .applied } == true)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }

        // Meanwhile a device pulls the team scope page by page from any process, and keeps
        // its cursor across pages exactly as a device does.
        let reader = try await cluster.token(user: "watcher", device: "watcher-tablet")
        var cursor: String?
        var seen: [String] = []
        var page = 0
        func pullOnce() async throws -> PullResponse {
            page += 1
            let response = try await servers[page % servers.count].pull(scope: "team", cursor: cursor, limit: 7, token: reader)
            seen += response.upserts["Task"]?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
            cursor = response.cursor
            return response
        }
        while !finished.isOpen {
            _ = try await pullOnce()
            try await Task.sleep(for: .milliseconds(20))
        }
        try await pushing.value
        while try await pullOnce().hasMore {}

        let expectedTasks = Set(
            (0..<devices).flatMap { device in
                (0..<(pushesPerDevice * batch)).filter { $0 % 2 == 0 }.map { "task-d\(device)-\($0 + 1)" }
            })
        #expect(seen.count == expectedTasks.count, "each task pulled exactly once")
        #expect(Set(seen) == expectedTasks, "no task skipped")

        let total = Int64(devices * pushesPerDevice * batch)
        let probe = cluster.probe
        #expect(try await probe.integer("SELECT count(*) FROM tasks") + probe.integer("SELECT count(*) FROM statements") == total)
        #expect(try await probe.integer("SELECT count(*) FROM tasks WHERE _version <> 1") == 0)
        #expect(try await probe.integer("SELECT count(*) FROM push_results") == Int64(devices * pushesPerDevice), "one record per push")
        #expect(try await probe.integer("SELECT sum(last_seq - first_seq + 1)::BIGINT FROM push_results") == total, "a result per seq")
        #expect(
            try await probe.integer("SELECT count(*) FROM audit_log WHERE operation = 'push'") == Int64(devices * pushesPerDevice),
            "one audit entry per push")
        #expect(try await probe.integer("SELECT count(DISTINCT _seq) FROM tasks") == Int64(expectedTasks.count))
        #expect(try await probe.integer("SELECT max(_seq) FROM tasks") == Int64(expectedTasks.count), "the scope's sequence has no gap")
        let verify = try cluster.auditVerify()
        #expect(verify.status == 0 && verify.stdout.contains("audit log intact"), "\(verify.stdout)\(verify.stderr)")
    }
}

import ContractRuntime
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `GET /admin/v1/changes`: a tenant's applied changes in commit order, over a real server on
/// loopback, on both storages.
@Suite("Change feed: a tenant's applied changes in commit order")
struct ChangeFeedTests {
    /// Makes alice a member of `team-1`, whose scope the tests write.
    static func join(_ client: any TestClientProtocol, _ h: HostileHarness) async throws {
        let response = try await client.execute(
            uri: "/admin/v1/teams/team-1/members/alice", method: .put, headers: HostileHarness.headers(h.adminToken))
        #expect(response.status == .noContent)
    }

    static func push(_ client: any TestClientProtocol, _ token: String, client id: String, _ mutations: [Mutation]) async throws {
        let body = try JSONEncoder().encode(PushRequest(clientId: id, schema: [:], mutations: mutations))
        let response = try await client.execute(
            uri: "/sync/v1/push", method: .post, headers: HostileHarness.headers(token, [.contentType: "application/json"]),
            body: ByteBuffer(data: body))
        #expect(response.status == .ok)
        let answer = try JSONDecoder().decode(PushResponse.self, from: Data(buffer: response.body))
        #expect(answer.results.allSatisfy { $0.status == .applied }, "\(answer.results)")
    }

    static func task(_ seq: Int64, _ id: String, status: String = "assigned") -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(seq)", entity: "Task", op: .create, id: id,
            payload: .object([
                "id": .string(id), "team_id": .string("team-1"), "title": .string("Swap \(id)"), "task_kind": .string("battery_swap"),
                "status": .string(status),
            ]))
    }

    static func asset(_ seq: Int64, _ id: String) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(seq)", entity: "ServiceAsset", op: .create, id: id,
            payload: .object([
                "id": .string(id), "team_id": .string("team-1"), "asset_tag": .string("TAG-\(id)"), "display_name": .string("Van"),
                "category": .string("vehicle"),
            ]),
            hlc: HybridLogicalClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) - 1000, counter: 0, node: "alice").description)
    }

    struct Page {
        var changes: [[String: JSONValue]]
        var cursor: String
        var hasMore: Bool
        var status: HTTPResponse.Status
        var error: String?

        var ids: [String] { changes.map { text($0["id"]) ?? "?" } }
        var operations: [String] { changes.map { text($0["operation"]) ?? "?" } }
    }

    static func text(_ value: JSONValue?) -> String? {
        guard case .string(let text)? = value else { return nil }
        return text
    }

    static func feed(_ client: any TestClientProtocol, _ token: String, _ query: String = "") async throws -> Page {
        let response = try await client.execute(uri: "/admin/v1/changes" + query, method: .get, headers: HostileHarness.headers(token))
        let body = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: response.body))
        guard case .object(let object) = body else { return Page(changes: [], cursor: "", hasMore: false, status: response.status) }
        if case .object(let error)? = object["error"] {
            return Page(changes: [], cursor: "", hasMore: false, status: response.status, error: text(error["code"]))
        }
        guard case .array(let changes)? = object["changes"], case .bool(let more)? = object["has_more"] else {
            return Page(changes: [], cursor: "", hasMore: false, status: response.status)
        }
        return Page(
            changes: changes.compactMap { if case .object(let change) = $0 { change } else { nil } }, cursor: text(object["cursor"]) ?? "",
            hasMore: more, status: response.status)
    }

    @Test(
        "changes come in commit order with their rows; a row changed again is delivered at its latest change; pages resume by cursor; a contract filter",
        arguments: StorageKind.allCases)
    func orderAndResume(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            try await Self.join(client, h)
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(1, "task-1"), Self.task(2, "task-2")])
            try await Self.push(
                client, h.ownerToken, client: "alice-phone",
                [
                    Mutation(
                        seq: 3, clientMutationId: "cm-3", entity: "Task", op: .patch, id: "task-1",
                        payload: .object(["status": .string("in_progress")]),
                        baseVersion: 1)
                ])
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.asset(4, "asset-1")])

            let all = try await Self.feed(client, h.adminToken)
            #expect(all.status == .ok)
            #expect(all.ids == ["task-2", "task-1", "asset-1"], "task-1's create is delivered at its patch, with the patched row")
            #expect(all.operations == ["create", "patch", "create"])
            #expect(!all.hasMore)
            let patched = try #require(all.changes.dropFirst().first)
            #expect(patched["version"] == .int(2))
            #expect(patched["scope_key"] == .string("ops:team:team-1"))
            #expect(patched["user_id"] == .string("alice") && patched["device_id"] == .string("alice-phone"))
            guard case .object(let row)? = patched["row"] else { Issue.record("no row: \(patched)"); return }
            #expect(row["status"] == .string("in_progress") && row["title"] == .string("Swap task-1"))

            // One at a time, each page resuming where the one before stopped.
            var seen: [String] = []
            var cursor = ""
            for _ in 0..<4 {
                let page = try await Self.feed(client, h.adminToken, "?limit=1" + (cursor.isEmpty ? "" : "&after=\(cursor)"))
                seen += page.ids
                cursor = page.cursor
                if !page.hasMore { break }
            }
            #expect(seen == ["task-2", "task-1", "asset-1"])
            let after = try await Self.feed(client, h.adminToken, "?after=\(all.cursor)")
            #expect(after.changes.isEmpty && !after.hasMore && after.cursor == all.cursor)

            #expect(try await Self.feed(client, h.adminToken, "?contracts=ServiceAsset").ids == ["asset-1"])

            // A deletion: delivered as one, without a row.
            try await Self.push(
                client, h.ownerToken, client: "alice-phone",
                [Mutation(seq: 5, clientMutationId: "cm-5", entity: "Task", op: .delete, id: "task-2", baseVersion: 1)])
            let deleted = try await Self.feed(client, h.adminToken, "?after=\(all.cursor)")
            #expect(deleted.ids == ["task-2"] && deleted.operations == ["delete"])
            #expect(deleted.changes.first?["row"] == .null)
            #expect(
                try await Self.feed(client, h.adminToken).ids == ["task-1", "asset-1", "task-2"],
                "read from the start, task-2's create is delivered at its deletion")

            // Alice's erasure: her changes leave the feed, and the erasure itself is delivered,
            // whatever contracts the reader asked for.
            let erased = try await client.execute(uri: "/admin/v1/users/alice", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(erased.status == .ok)
            let afterErasure = try await Self.feed(client, h.adminToken, "?contracts=Task")
            #expect(afterErasure.ids == ["alice"] && afterErasure.operations == ["erase"])
            #expect(afterErasure.changes.first?["kind"] == .string("erasure"))
        }
    }

    @Test("with `wait`, an empty page waits for the next commit and returns it", arguments: StorageKind.allCases)
    func waitsForACommit(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.serve { server in
            let client = server.client
            try await Self.join(client, h)
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(1, "task-1")])
            let start = try await Self.feed(client, h.adminToken)
            // The waiting request on a connection of its own; the push on the test client's.
            var waiting = URLRequest(
                url: server.url.appendingPathComponent("admin/v1/changes").appending(queryItems: [
                    URLQueryItem(name: "wait", value: "20"), URLQueryItem(name: "after", value: start.cursor),
                ]))
            waiting.setValue("Bearer \(h.adminToken)", forHTTPHeaderField: "Authorization")
            waiting.timeoutInterval = 30
            let request = waiting
            let started = ContinuousClock.now
            async let answer = URLSession.shared.data(for: request)
            try await Task.sleep(for: .milliseconds(300))
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(2, "task-2")])
            let (data, _) = try await answer
            guard case .object(let body) = try JSONDecoder().decode(JSONValue.self, from: data), case .array(let changes)? = body["changes"] else {
                Issue.record("not a page: \(String(decoding: data, as: UTF8.self))")
                return
            }
            #expect(changes.compactMap { if case .object(let change) = $0 { Self.text(change["id"]) } else { nil } } == ["task-2"])
            #expect(ContinuousClock.now - started < .seconds(10), "woken by the commit, not by the end of the wait")

            let quiet = ContinuousClock.now
            let empty = try await Self.feed(client, h.adminToken, "?wait=1&after=\(Self.text(body["cursor"]) ?? "")")
            #expect(empty.changes.isEmpty && empty.status == .ok)
            #expect(ContinuousClock.now - quiet >= .milliseconds(900), "nothing came: it waited its second")
        }
    }

    @Test(
        "bad input is refused with a stable code; a device token gets 403; a cursor before the archived log gets 410", arguments: StorageKind.allCases
    )
    func refusals(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            try await Self.join(client, h)
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(1, "task-1")])
            let first = try await Self.feed(client, h.adminToken)
            #expect(first.ids == ["task-1"])
            let bad = try await Self.feed(client, h.adminToken, "?after=nonsense")
            #expect(bad.status == .badRequest && bad.error == "malformed_request")
            let unknown = try await Self.feed(client, h.adminToken, "?contracts=Task,Nope")
            #expect(unknown.status == .badRequest && unknown.error == "unknown_entity")
            #expect(try await Self.feed(client, h.adminToken, "?limit=0").error == "malformed_request")
            #expect(try await Self.feed(client, h.adminToken, "?wait=61").error == "malformed_request")
            #expect(try await Self.feed(client, h.ownerToken).status == .forbidden)

            // A backend service's integration token reads the feed, and does nothing else an admin may.
            let integration = h.signer.sign(
                DeviceIdentity(
                    tenant: HostileHarness.tenant, userID: "billing", deviceID: "billing-service", isIntegration: true,
                    expiresAt: Int64(Date().timeIntervalSince1970) + 600))
            #expect(try await Self.feed(client, integration).ids == ["task-1"])
            let revoke = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(integration),
                body: ByteBuffer(string: #"{"user": "alice"}"#))
            #expect(revoke.status == .forbidden)

            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("feed-archive-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(2, "task-2")])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            _ = try #require(try await AuditChain.archive(h.storage, before: now + 60_000, to: folder.appendingPathComponent("audit.jsonl")))
            let expired = try await Self.feed(client, h.adminToken, "?after=\(first.cursor)")
            #expect(expired.status == .gone && expired.error == "cursor_expired")
            let fresh = try await Self.feed(client, h.adminToken)
            #expect(fresh.status == .ok && fresh.changes.isEmpty, "the archived changes left the feed with the log")
        }
    }
}

extension ChangeFeedTests {
    @Test(
        "two processes on one database (the engines' own contracts): a push held open while another commits is delivered in commit order, by either process's feed",
        arguments: StorageKind.allCases)
    func commitOrderAcrossProcesses(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let processes = try await ConcurrencyTests.TwoProcesses(kind, folder: h.folder)
        let slow = processes.heldPush, fast = processes.otherPush
        let device = DeviceIdentity(tenant: PushHarness.tenant, userID: "alice", deviceID: "alice-phone", teams: ["red"], expiresAt: .max)
        let tablet = DeviceIdentity(tenant: PushHarness.tenant, userID: "bob", deviceID: "bob-tablet", teams: ["red"], expiresAt: .max)
        let held = Task {
            try await slow.push(
                PushRequest(clientId: "alice-phone", schema: [:], mutations: [h.mutation(1, "Card", .create, "slow-1", h.cardPayload("slow-1"))]),
                identity: device)
        }
        await processes.reached.wait()
        // The second push reaches the audit head while the first holds it, and commits after it.
        let other = Task {
            try await fast.push(
                PushRequest(clientId: "bob-tablet", schema: [:], mutations: [h.mutation(1, "Card", .create, "fast-1", h.cardPayload("fast-1"))]),
                identity: tablet)
        }
        try await processes.waitUntilBlocked("the second push waits for the first")
        for storage in processes.storages {
            let page = try await ChangeFeed(storage: storage).page(
                tenant: PushHarness.tenant, after: nil, contracts: nil, limit: 10)
            #expect(page.changes.isEmpty, "nothing committed yet")
        }
        processes.release.open()
        _ = try await held.value
        _ = try await other.value
        for storage in processes.storages {
            let page = try await ChangeFeed(storage: storage).page(
                tenant: PushHarness.tenant, after: nil, contracts: nil, limit: 10)
            #expect(page.changes.map { if case .object(let change) = $0 { Self.text(change["id"]) ?? "?" } else { "?" } } == ["slow-1", "fast-1"])
        }
    }
}

extension ChangeFeedTests {
    static func publish(_ client: any TestClientProtocol, _ h: HostileHarness, _ entity: String, _ row: String) async throws {
        let response = try await client.execute(
            uri: "/admin/v1/content/\(entity)", method: .post, headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]),
            body: ByteBuffer(string: row))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
    }

    @Test(
        "content an admin publishes and deletes is in the feed, in commit order with the devices' changes; a write of server-only fields alone is not",
        arguments: StorageKind.allCases)
    func contentChanges(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            try await Self.join(client, h)
            try await Self.publish(client, h, "Unit", #"{"id": "unit-a", "title": "Ladders", "learner_level": "beginner", "sort_index": 1}"#)
            try await Self.push(client, h.ownerToken, client: "alice-phone", [Self.task(1, "task-1")])
            try await Self.publish(client, h, "Unit", #"{"id": "unit-b", "title": "Roofs", "learner_level": "advanced", "sort_index": 2}"#)

            let all = try await Self.feed(client, h.adminToken)
            #expect(all.ids == ["unit-a", "task-1", "unit-b"])
            #expect(all.operations == ["publish", "create", "publish"])
            let published = try #require(all.changes.first)
            #expect(published["kind"] == .string("entity") && published["version"] == .int(1))
            #expect(published["scope_key"] == .string("content:global"))
            #expect(published["user_id"] == .string("admin") && published["device_id"] == .string("console"))
            guard case .object(let row)? = published["row"] else {
                Issue.record("no row: \(published)")
                return
            }
            #expect(row["title"] == .string("Ladders") && row["learner_level"] == .string("beginner"))
            #expect(try await Self.feed(client, h.adminToken, "?contracts=Unit").ids == ["unit-a", "unit-b"])

            // A deletion: delivered as one, without a row; read from the start, unit-a's publish
            // is delivered at its deletion.
            let delete = try await client.execute(
                uri: "/admin/v1/content/Unit/unit-a", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(delete.status == .noContent)
            let deleted = try await Self.feed(client, h.adminToken, "?after=\(all.cursor)")
            #expect(deleted.ids == ["unit-a"] && deleted.operations == ["delete"])
            #expect(deleted.changes.first?["row"] == .null && deleted.changes.first?["version"] == .int(2))
            #expect(try await Self.feed(client, h.adminToken).ids == ["task-1", "unit-b", "unit-a"])

            // Seeded content comes as `seed`; a write of server-only fields alone changes nothing
            // a device or the feed's row shows, and is not a change.
            _ = try await SampleContent.seed(
                storage: h.storage, tenant: HostileHarness.tenant, team: "team-1", clock: SystemClock())
            let seeded = try await Self.feed(client, h.adminToken, "?after=\(deleted.cursor)&contracts=Assessment&limit=1000")
            #expect(seeded.ids.contains("assessment-battery-basics") && Set(seeded.operations) == ["seed"], "\(seeded.ids) \(seeded.operations)")
            let admin = DeviceIdentity(tenant: HostileHarness.tenant, userID: "admin", deviceID: "console", isAdmin: true, expiresAt: .max)
            try await ContentService(storage: h.storage, apps: SampleServerApps.all).setServerOnlyFields(
                entity: "Assessment", id: "assessment-battery-basics",
                ["answer_key": .array([.object(["id": .string("q1"), "correct": .string("b"), "points": .int(2)])])], identity: admin,
                operation: .publish)
            let serverOnly = try await Self.feed(client, h.adminToken, "?after=\(seeded.cursor)")
            #expect(serverOnly.status == .ok && serverOnly.changes.isEmpty, "\(serverOnly.ids)")
        }
    }
}

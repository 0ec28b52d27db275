import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// One end-to-end scene: a temporary folder holding a seeded `sync-server` (started) and the
/// home folders of the devices that talk to it. Everything is killed and removed when the stage
/// is released, whatever the test did.
///
/// The harness the crash suite builds on: ``SyncServerProcess`` can be stopped, crashed and
/// restarted on its port; ``Device/start(_:now:)`` runs a command that can be killed at any
/// moment; ``expectEveryWriteOnceOnServer(_:)`` checks the exactly-once ledger afterwards.
final class Stage {
    static let tenant = "demo"
    static let team = "team-1"
    static let teamScope = "ops:team:team-1"

    private let directory: TemporaryDirectory
    let server: SyncServerProcess

    var folder: URL { directory.url }

    /// `serveOptions`: added to the server's `serve` (`--max-asset-bytes N`). With `storage`
    /// `.postgres` the server stores in a schema of its own of the test PostgreSQL
    /// (`OUTPOST_TEST_POSTGRES_URL`); the checks that read the server's storage directly
    /// (``storage()``) are SQLite's.
    init(storage: StorageKind = .sqlite, serveOptions: [String] = []) throws {
        directory = try TemporaryDirectory(prefix: "outpost-e2e")
        var options = serveOptions
        if storage == .postgres {
            guard var components = URLComponents(string: try StorageKind.postgresURL()) else { throw StorageKind.MissingPostgres() }
            components.queryItems =
                (components.queryItems ?? []).filter { $0.name != "schema" } + [URLQueryItem(name: "schema", value: StorageKind.uniqueSchema())]
            options += ["--postgres", components.string!]
        }
        server = SyncServerProcess(data: directory.url.appendingPathComponent("server", isDirectory: true), serveOptions: options)
        try server.seed(team: Self.team)
        try server.start()
    }

    deinit {
        // Before the folder goes (the properties are released after this).
        try? server.crash()
    }

    /// A new device logged in as `user` (with a token for `teams`), and synced once.
    func device(_ name: String, user: String, teams: [String] = [], sync: Bool = true) throws -> Device {
        let device = try Device(name, in: folder)
        let token = try server.token(user: user, device: name, teams: teams)
        try device.ok(["login", "--server", try server.url.absoluteString, "--token", token])
        if sync { try device.ok(["sync"]) }
        return device
    }

    /// An admin token (publishes content, uploads asset files).
    func adminToken() throws -> String {
        let result = try server.command([
            "token", "--data", server.data.path, "--tenant", Self.tenant, "--user", "admin", "--device", "e2e", "--admin",
        ])
        guard result.status == 0 else { throw SyncServerProcess.Failure("no admin token: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The test's HTTP client of the running server.
    func client() throws -> ServerClient {
        ServerClient(base: try server.url)
    }

    /// Publishes an asset file of `megabytes` of seeded random bytes on a lesson (its `Asset`
    /// row, then the file); returns its id and checksum.
    func publishLargeAsset(id: String, lesson: String, megabytes: Int, seed: UInt64) async throws -> (id: String, checksum: String) {
        let random = SeededRandomSource(seed: seed)
        var data = Data(count: megabytes * 1024 * 1024)
        data.withUnsafeMutableBytes { buffer in
            let words = buffer.bindMemory(to: UInt64.self)
            for index in words.indices { words[index] = random.next() }
        }
        let checksum = Hex.sha256(data)
        let admin = try adminToken()
        let client = try client()
        try await client.publish(
            "Asset",
            [
                "id": .string(id), "lesson_id": .string(lesson), "asset_kind": .string("video"),
                "content_type": .string("application/octet-stream"),
                "size_bytes": .int(Int64(data.count)), "checksum": .string(checksum), "storage_key": .string(checksum),
            ],
            adminToken: admin
        )
        // Random bytes are no MP4: published as bytes of no particular type (the server checks a
        // file's first bytes against its type).
        try await client.uploadAsset(id: id, data: data, contentType: "application/octet-stream", adminToken: admin)
        return (id, checksum)
    }

    /// The token and push client id of a device, to pull as it would.
    func credentials(of device: Device) throws -> (token: String, clientID: String, scopes: [String]) {
        let profile = try device.profile()
        let token = try #require(profile["token"].string)
        let clientID = try DeviceInspector.read(device) { $0.store.identity.clientId }
        return (token, clientID, profile["scopes"].array.compactMap(\.string))
    }

    /// What the running server holds in each of the device's scopes, by scope key.
    func serverContents(for device: Device) async throws -> [String: ScopeContents] {
        let (token, clientID, scopes) = try credentials(of: device)
        var contents: [String: ScopeContents] = [:]
        for scope in scopes {
            contents[scope] = ScopeContents(pages: try await client().pullAll(scope: scope, limit: nil, token: token, clientID: clientID))
        }
        return contents
    }

    /// The device (not running) and the running server hold the same rows, field for field, in
    /// every scope the device subscribes to.
    func expectAgreement(_ device: Device, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let server = try await serverContents(for: device)
        let onDevice = try DeviceInspector.read(device) { inspector in
            try server.keys.sorted().map { ($0, try inspector.contents(ofScope: $0)) }
        }
        for (scope, rows) in onDevice {
            let expected = server[scope] ?? ScopeContents(rows: [:])
            #expect(rows.ids == expected.ids, "\(device.name), \(scope): ids differ", sourceLocation: sourceLocation)
            for (contract, byID) in expected.rows {
                for (id, row) in byID where rows.rows[contract]?[id] != nil && rows.rows[contract]?[id] != row {
                    Issue.record(
                        "\(device.name), \(scope): \(contract) \(id) differs: device \(rows.rows[contract]![id]!), server \(row)",
                        sourceLocation: sourceLocation
                    )
                }
            }
        }
    }

    /// The server's storage, for assertions once the server is stopped.
    func storage() throws -> SQLiteStorage {
        try SQLiteStorage(directory: server.data, contracts: ContractRegistry.self)
    }

    /// A contract row as the server stores it, in wire form (`nil` when absent).
    func serverRow(_ entity: EntityDescriptor, id: String) async throws -> [String: JSONValue]? {
        let storage = try storage()
        return try await storage.read { reader in
            try await reader.row(in: ContractTable(entity), tenant: Self.tenant, id: id).map { row in
                var wire: [String: JSONValue] = [:]
                for field in entity.fields { wire[field.name] = RowCodec.wireValue(row.columns[field.name] ?? .null, for: field) }
                return wire
            }
        }
    }

    /// Every change `device` queued reached the server exactly once: the server recorded one
    /// answer for each wire `seq` the device used, for the same client mutation id, none beyond
    /// the last; the audit log holds one entry per change (a resent change is answered from its
    /// stored result, never applied or audited again); and each recorded event is stored under
    /// its id.
    func expectEveryWriteOnceOnServer(_ device: Device, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let outbox = try device.json(["outbox", "--all"])
        let clientID = try #require(outbox["client_id"].string, sourceLocation: sourceLocation)
        let entries = outbox["entries"].array
        #expect(!entries.isEmpty, "\(device.name) queued nothing", sourceLocation: sourceLocation)
        for entry in entries {
            #expect(entry["status"].string == "done", "\(device.name): \(entry)", sourceLocation: sourceLocation)
        }
        let sent = entries.compactMap { entry in entry["push_seq"].int.map { ($0, entry) } }
        #expect(sent.count == entries.count, "\(device.name): a change never got a wire seq", sourceLocation: sourceLocation)
        let storage = try storage()
        let tenant = Self.tenant
        let seqs = sent.map(\.0)
        let ledger = try await storage.read { reader in
            var results: [String?] = []
            for seq in seqs { results.append(try await reader.pushResult(tenant: tenant, clientID: clientID, seq: seq)) }
            return (last: try await reader.lastSequence(tenant: tenant, clientID: clientID), results: results)
        }
        #expect(ledger.last == sent.map(\.0).max(), "\(device.name): the server's last seq", sourceLocation: sourceLocation)
        let audited = try await auditedMutations(clientID: clientID)
        for entry in entries {
            let id = entry["client_mutation_id"].string ?? "?"
            #expect(audited[id] == 1, "\(device.name): change \(id) audited \(audited[id] ?? 0) times", sourceLocation: sourceLocation)
        }
        for ((seq, entry), stored) in zip(sent, ledger.results) {
            let text = try #require(stored, "\(device.name): no server answer for seq \(seq)", sourceLocation: sourceLocation)
            let result = try JSONDecoder().decode(MutationResult.self, from: Data(text.utf8))
            #expect(result.clientMutationId == entry["client_mutation_id"].string, sourceLocation: sourceLocation)
            if entry["op"].string == "event", let name = entry["entity"].string, let event = ContractRegistry.event(named: name),
                let id = entry["row_id"].string
            {
                let stored = try await storage.read { reader in try await reader.row(in: ContractTable(event), tenant: tenant, id: id) != nil }
                #expect(stored, "\(device.name): event \(name) \(id) is not on the server", sourceLocation: sourceLocation)
            }
        }
    }

    /// How many audit entries name each client mutation id of a client (on the stopped server).
    func auditedMutations(clientID: String) async throws -> [String: Int] {
        let storage = try storage()
        var counts: [String: Int] = [:]
        var after: Int64 = 0
        while true {
            let from = after
            let key = storage.auditKey
            // Details are stored encrypted per user: read in clear.
            let (page, details) = try await storage.read { reader in
                let page = try await reader.auditEntries(after: from, limit: 1000)
                return (page, try await AuditChain.readableDetails(of: page, in: reader, key: key))
            }
            guard let last = page.last else { return counts }
            // A push's entry lists its mutations (and the rows its reducers wrote, `fold`).
            for (entry, text) in zip(page, details) {
                guard let text else { continue }
                for change in try AuditedChange.changes(of: entry, readableDetail: text) where change.operation != .fold {
                    guard change.detail["client_id"] == .string(clientID), case .string(let mutation)? = change.detail["client_mutation_id"] else {
                        continue
                    }
                    counts[mutation, default: 0] += 1
                }
            }
            after = last.id
        }
    }

    /// Stops the server, then checks that every change of `device` is on it exactly once and
    /// that its audit chain verifies.
    func stopAndExpectEveryWriteOnce(_ device: Device, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try server.stop()
        try await expectEveryWriteOnceOnServer(device, sourceLocation: sourceLocation)
        let audit = try verifyAudit()
        #expect(audit.status == 0, "\(audit)", sourceLocation: sourceLocation)
    }

    /// `sync-server audit verify` on the stopped server's data.
    func verifyAudit() throws -> CommandResult {
        try server.command(["audit", "verify", "--data", server.data.path])
    }
}

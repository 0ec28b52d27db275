import Contracts
import Foundation
import SyncProtocol
import SyncServer
import Testing

/// One end-to-end scene: a temporary folder holding a seeded `sync-server` (started) and the
/// home folders of the devices that talk to it. Everything is killed and removed when the stage
/// is released, whatever the test did.
///
/// The harness the crash suite builds on: ``ServerProcess`` can be stopped, crashed and
/// restarted on its port; ``Device/start(_:now:)`` runs a command that can be killed at any
/// moment; ``expectEveryWriteOnceOnServer(_:)`` checks the exactly-once ledger afterwards.
final class Stage {
    static let tenant = "demo"
    static let team = "team-1"

    let folder: URL
    let server: ServerProcess

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-e2e-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        server = try ServerProcess(data: folder.appendingPathComponent("server", isDirectory: true))
        try server.seed(team: Self.team)
        try server.start()
    }

    deinit {
        try? server.crash()
        try? FileManager.default.removeItem(at: folder)
    }

    /// A new device logged in as `user` (with a token for `teams`), and synced once.
    func device(_ name: String, user: String, teams: [String] = [], sync: Bool = true) throws -> Device {
        let device = try Device(name, in: folder)
        let token = try server.token(user: user, device: name, teams: teams)
        try device.ok(["login", "--server", try server.url.absoluteString, "--token", token])
        if sync { try device.ok(["sync"]) }
        return device
    }

    /// The server's storage, for assertions once the server is stopped.
    func storage() throws -> SQLiteStorage {
        try SQLiteStorage(directory: server.data)
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
    /// the last; and each recorded event is stored once under its id.
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

    /// `sync-server audit verify` on the stopped server's data.
    func verifyAudit() throws -> CommandResult {
        try server.command(["audit", "verify", "--data", server.data.path])
    }
}

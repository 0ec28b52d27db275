import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// `sync-server export` and `sync-server erase`, run as an operator runs them.
@Suite("sync-server export and erase", .blockingWork)
struct UserDataCLITests {
    @Test("export writes the user's JSON lines to a file; erase prints what it erased, and the export after it holds no row")
    func exportThenErase() async throws {
        let folder = CLITests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        let learner = DeviceIdentity(tenant: "acme", userID: "u-9", deviceID: "tablet-9", expiresAt: .max)
        let statement: JSONValue = .object([
            "id": .string("st-9"), "verb": .string("completed"), "object_id": .string("lesson-1"), "stated_at": .string("2026-01-01T07:00:00.000Z"),
        ])
        _ = try await PushService(storage: storage, reducers: SampleServerApps.reducers).push(
            PushRequest(
                clientId: "tablet-9", schema: [:],
                mutations: [Mutation(seq: 1, clientMutationId: "m-1", entity: "Statement", op: .create, id: "st-9", payload: statement)]
            ),
            identity: learner
        )

        let out = folder.appendingPathComponent("u-9.jsonl")
        let export = try SyncServerCommand.run(["export", "--data", folder.path, "--tenant", "acme", "--user", "u-9", "--out", out.path])
        #expect(export.status == 0, "\(export.stderr)")
        let lines = try String(contentsOf: out, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.contains(#""type":"row""#) && $0.contains(#""st-9""#) })
        #expect(lines.contains { $0.contains(#""type":"device""#) && $0.contains(#""tablet-9""#) })

        let erase = try SyncServerCommand.run(["erase", "--data", folder.path, "--tenant", "acme", "--user", "u-9"])
        #expect(erase.status == 0, "\(erase.stderr)")
        let report = try JSONDecoder().decode(UserErasure.Report.self, from: Data(erase.stdout.utf8))
        #expect(report.userID == "u-9" && report.pushResultsDeleted == 1 && report.rowsErased >= 1)

        let after = try SyncServerCommand.run(["export", "--data", folder.path, "--tenant", "acme", "--user", "u-9"])
        #expect(after.status == 0)
        #expect(!after.stdout.contains(#""type":"row""#))
        #expect(after.stdout.contains(#""erased_at""#))

        let verify = try SyncServerCommand.run(["audit", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify.stdout)")

        let misuse = try SyncServerCommand.run(["erase", "--data", folder.path, "--tenant", "acme", "--user", ""])
        #expect(misuse.status == 64)
    }

    @Test("audit verify --archive with no audit key anywhere fails and makes none")
    func verifyArchiveNeedsAKey() throws {
        let folder = CLITests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let archive = folder.appendingPathComponent("archive.jsonl")
        try Data("{}\n".utf8).write(to: archive)
        let run = try SyncServerCommand.run(["audit", "verify", "--data", folder.path, "--archive", archive.path])
        #expect(run.status == 2)
        #expect(run.stderr.contains("no audit key"))
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(AuditKey.fileName).path))
    }
}

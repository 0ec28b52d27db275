import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SampleServerApps
import Testing

@testable import SyncServer

/// Runs the real `sync-server` binary, as an operator does.
@Suite("sync-server command line", .blockingWork)
struct CLITests {
    static func temporaryFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sync-cli-\(UUID().uuidString)")
    }

    @Test("token prints a token the server's key verifies, with every claim asked for; --team records the membership")
    func token() async throws {
        let folder = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try SyncServerCommand.run([
            "token", "--data", folder.path, "--tenant", "acme", "--user", "u-7", "--device", "tablet-3", "--team", "team-1", "--team", "team-2",
            "--admin", "--ttl", "600",
        ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("created a new token key"))
        let token = run.stdout.trimmingCharacters(in: .newlines)
        #expect(run.stdout == token + "\n")
        let signer = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        let now = Int64(Date().timeIntervalSince1970)
        let identity = try await signer.verify(token, now: now)
        #expect(identity.tenant == "acme" && identity.userID == "u-7" && identity.deviceID == "tablet-3")
        #expect(identity.teams == ["team-1", "team-2"] && identity.isAdmin)
        #expect((now + 590)...(now + 610) ~= identity.expiresAt)
        // The membership is the server's, recorded in its database.
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        #expect(
            try await storage.read { try await $0.identityState(tenant: "acme", userID: "u-7", deviceID: "tablet-3") }.teams == ["team-1", "team-2"])

        // The environment variable signs when no folder or file is given.
        let secret = String(repeating: "k", count: 32)
        let fromEnvironment = try SyncServerCommand.run(
            ["token", "--tenant", "t", "--user", "u", "--device", "d"], environment: [TokenKey.environmentVariable: secret])
        #expect(fromEnvironment.status == 0)
        let verified = try await TokenSigner(secret: Data(secret.utf8)).verify(fromEnvironment.stdout.trimmingCharacters(in: .newlines), now: now)
        #expect(verified.userID == "u")
        #expect((now + 3500)...(now + 3700) ~= verified.expiresAt, "device tokens last an hour by default")
    }

    @Test("misuse exits 64 with a message; a failure to do the work exits 2")
    func misuse() throws {
        let noKey = try SyncServerCommand.run(["token", "--tenant", "t", "--user", "u", "--device", "d"])
        #expect(noKey.status == 64)
        #expect(noKey.stderr.contains("give --data DIR"))
        let badTTL = try SyncServerCommand.run(["token", "--tenant", "t", "--user", "u", "--device", "d", "--data", "/tmp", "--ttl", "0"])
        #expect(badTTL.status == 64)
        #expect(badTTL.stderr.contains("--ttl must be"))
        // Once a crash (the expiry overflowed): every integer option is range-checked.
        let hugeTTL = try SyncServerCommand.run([
            "token", "--tenant", "t", "--user", "u", "--device", "d", "--data", "/tmp", "--ttl", "9223372036854775807",
        ])
        #expect(hugeTTL.status == 64, "\(hugeTTL.stderr)")
        #expect(hugeTTL.stderr.contains("--ttl must be"))
        let unknown = try SyncServerCommand.run(["serve", "--data", "/tmp", "--colour"])
        #expect(unknown.status == 64)
        let negativeReadAhead = try SyncServerCommand.run(["serve", "--data", "/tmp", "--pull-read-ahead=-1"])
        #expect(negativeReadAhead.status == 64)
        #expect(negativeReadAhead.stderr.contains("--pull-read-ahead must be 0 or more"), "\(negativeReadAhead.stderr)")
        let missingFile = try SyncServerCommand.run(["token", "--tenant", "t", "--user", "u", "--device", "d", "--secret-file", "/no/such/key"])
        #expect(missingFile.status == 2)
        #expect(missingFile.stderr == "error: cannot read the token key file /no/such/key\n")
        let noData = try SyncServerCommand.run(["audit", "verify", "--data", Self.temporaryFolder().path])
        #expect(noData.status == 2)
        #expect(noData.stderr.contains("no server database"))

        let help = try SyncServerCommand.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("Exit codes:"))
    }

    @Test("audit verify: intact after seeding (exit 0), then names the first edited entry (exit 1)")
    func auditVerify() async throws {
        let folder = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        _ = try await SampleContent.seed(
            storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
        )
        let entries = try await storage.read { try await $0.auditEntries(after: 0, limit: 10_000).count }
        #expect(entries > 3)

        let intact = try SyncServerCommand.run(["audit", "verify", "--data", folder.path])
        #expect(intact.status == 0, "\(intact.stderr)")
        #expect(intact.stdout == "audit log intact: \(entries) entries\n")

        let database = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try await database.write { db in try db.execute(sql: "UPDATE audit_log SET outcome = 'tampered' WHERE id = 3") }
        let broken = try SyncServerCommand.run(["audit", "verify", "--data", folder.path])
        #expect(broken.status == 1)
        #expect(broken.stdout == "audit log broken at entry 3: its content does not match its seal\n")
    }

    @Test("audit verify exits 1 when the last audit row is deleted; export writes JSON lines and a checkpoint that catches a cut-back log")
    func auditCutTailAndExport() async throws {
        let folder = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        _ = try await SampleContent.seed(
            storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
        )
        let entries = try await storage.read { try await $0.auditEntries(after: 0, limit: 10_000).count }
        let exportFile = folder.appendingPathComponent("audit.jsonl")
        let export = try SyncServerCommand.run(["audit", "export", "--data", folder.path, "--out", exportFile.path])
        #expect(export.status == 0, "\(export.stderr)")
        let lines = try String(contentsOf: exportFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == entries + 1)
        #expect(lines.last?.hasPrefix(#"{"checkpoint":{"#) == true)
        #expect(try SyncServerCommand.run(["audit", "verify", "--data", folder.path, "--checkpoint", exportFile.path]).status == 0)

        // Someone with the database but not the key keeps a copy of the head, lets the log grow,
        // then cuts it back and puts the old head back: only a checkpoint from outside sees it.
        let database = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        let oldHead = try await database.read { db -> (Int64, String, String) in
            let row = try Row.fetchOne(db, sql: "SELECT last_id, last_hash, seal FROM audit_head")!
            return (row["last_id"], row["last_hash"], row["seal"])
        }
        _ = try await SampleContent.seed(
            storage: storage, tenant: "other", team: "team-9", clock: SystemClock()
        )
        let laterExport = folder.appendingPathComponent("later.jsonl")
        #expect(try SyncServerCommand.run(["audit", "export", "--data", folder.path, "--out", laterExport.path]).status == 0)
        let lastID = oldHead.0
        try await database.write { db in
            try db.execute(sql: "DELETE FROM audit_log WHERE id > ?", arguments: [lastID])
            try db.execute(sql: "UPDATE audit_head SET last_id = ?, last_hash = ?, seal = ?", arguments: [oldHead.0, oldHead.1, oldHead.2])
        }
        #expect(
            try SyncServerCommand.run(["audit", "verify", "--data", folder.path]).status == 0, "without a checkpoint the replayed head looks whole")
        let caught = try SyncServerCommand.run(["audit", "verify", "--data", folder.path, "--checkpoint", laterExport.path])
        #expect(caught.status == 1)
        #expect(caught.stdout.contains("the log was cut back"), "\(caught.stdout)")

        // The last row deleted: the sealed head still names it.
        try await database.write { db in try db.execute(sql: "DELETE FROM audit_log WHERE id = (SELECT MAX(id) FROM audit_log)") }
        let cut = try SyncServerCommand.run(["audit", "verify", "--data", folder.path])
        #expect(cut.status == 1)
        #expect(
            cut.stdout
                == "audit log broken at entry \(lastID): the log ends at entry \(lastID - 1) but its sealed head says \(lastID): entries were cut from its end\n"
        )
    }

    @Test("audit archive moves the old entries to a file both verifies check; nothing to archive exits 0; a bad date exits 64")
    func auditArchive() async throws {
        let folder = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        _ = try await SampleContent.seed(
            storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
        )
        let entries = try await storage.read { try await $0.auditEntries(after: 0, limit: 10_000).count }
        let file = folder.appendingPathComponent("audit-archive.jsonl")

        let nothing = try SyncServerCommand.run(["audit", "archive", "--data", folder.path, "--before", "2000-01-01", "--to", file.path])
        #expect(nothing.status == 0, "\(nothing.stderr)")
        #expect(nothing.stdout == "nothing to archive: no audit entry in the database was recorded before 2000-01-01\n")
        #expect(!FileManager.default.fileExists(atPath: file.path))
        let badDate = try SyncServerCommand.run(["audit", "archive", "--data", folder.path, "--before", "last tuesday", "--to", file.path])
        #expect(badDate.status == 64)
        #expect(badDate.stderr.contains("--before must be an ISO 8601 date"))

        let tomorrow = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
        let archive = try SyncServerCommand.run(["audit", "archive", "--data", folder.path, "--before", tomorrow, "--to", file.path])
        #expect(archive.status == 0, "\(archive.stderr)")
        #expect(archive.stdout == "archived \(entries) entries (1–\(entries)) to \(file.path)\n")
        let verify = try SyncServerCommand.run(["audit", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify.stdout)")
        #expect(verify.stdout.hasPrefix("audit log intact: 0 entries\nnote: entries 1–\(entries) were archived"))
        let alone = try SyncServerCommand.run(["audit", "verify", "--data", folder.path, "--archive", file.path])
        #expect(alone.status == 0, "\(alone.stdout)")
        #expect(alone.stdout == "audit archive intact: \(entries) entries\n")

        var lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map(String.init)
        lines[2] = lines[2].replacingOccurrences(of: #""outcome":""#, with: #""outcome":"x"#)
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: file)
        let broken = try SyncServerCommand.run(["audit", "verify", "--data", folder.path, "--archive", file.path])
        #expect(broken.status == 1)
        #expect(broken.stdout == "audit archive broken at entry 2: its content does not match its seal\n")
    }
}

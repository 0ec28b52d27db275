import ArgumentParser
import Foundation
import SyncServer

/// `sync-server erase`: a user's right to erasure.
struct EraseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "erase",
        abstract: "Erase a user's data: their rows, events, stored push results and audit details (410 user_erased to their devices).",
        discussion: """
            In one transaction: every row of the scopes the user owns becomes a bare tombstone, the events of those \\
            scopes are deleted, so are the stored results of their pushes, their audit details become unreadable (the \\
            chain still verifies), they leave every team, and the erasure is audited. Every token of theirs issued \\
            until now is answered 410 user_erased, on which the device wipes its store. Prints what was erased as JSON.
            """
    )

    @OptionGroup var data: DataOptions
    @Option(help: "The tenant.") var tenant: String
    @Option(help: "The user whose data to erase.") var user: String

    func validate() throws {
        guard !tenant.isEmpty, !user.isEmpty else { throw ValidationError("--tenant and --user must not be empty") }
    }

    func run() async throws {
        guard data.postgres != nil || data.directory.hasDatabase else {
            throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
        }
        let storage = try await data.openStorage()
        let report: UserErasure.Report
        do {
            report = try await UserErasure(storage: storage).erase(tenant: tenant, userID: user, requestedBy: .commandLine)
            await data.close(storage)
        } catch {
            await data.close(storage)
            throw fail("cannot erase \(user): \(error)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        say(String(decoding: try encoder.encode(report), as: UTF8.self))
    }
}

/// `sync-server export`: a user's right of access.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write everything held about a user as JSON lines: devices, teams, revocations, rows, events, audit entries.",
        discussion: "One JSON object per line, each with a `type` (user, device, team, revocation, row, event, audit). See docs/server.md."
    )

    @OptionGroup var data: DataOptions
    @Option(help: "The tenant.") var tenant: String
    @Option(help: "The user whose data to export.") var user: String
    @Option(help: ArgumentHelp("Write to this file instead of standard output.", valueName: "FILE")) var out: String?

    func validate() throws {
        guard !tenant.isEmpty, !user.isEmpty else { throw ValidationError("--tenant and --user must not be empty") }
    }

    func run() async throws {
        guard data.postgres != nil || data.directory.hasDatabase else {
            throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
        }
        let handle: FileHandle
        if let out {
            guard FileManager.default.createFile(atPath: out, contents: nil, attributes: [.posixPermissions: 0o600]),
                let file = FileHandle(forWritingAtPath: out)
            else { throw fail("cannot write \(out)") }
            handle = file
        } else {
            handle = FileHandle.standardOutput
        }
        let storage = try await data.openStorage()
        do {
            try await UserExport(storage: storage).export(tenant: tenant, userID: user) { handle.write($0) }
            await data.close(storage)
        } catch {
            await data.close(storage)
            throw fail("cannot export \(user): \(error)")
        }
        if out != nil { try? handle.close() }
    }
}

import Foundation
import OutpostTestSupport
import SyncServer

/// The `sync-server` commands the scenes run on their server's data folder, in the demo tenant.
extension SyncServerProcess {
    /// Loads the sample content.
    func seed(team: String = "team-1") throws {
        let result = try command(["seed", "--data", data.path, "--tenant", Stage.tenant, "--team", team] + postgresOptions)
        guard result.status == 0 else { throw Failure("seeding failed: \(result)") }
    }

    /// `--postgres URL` when the server stores in PostgreSQL (its serve options say), so the
    /// other commands reach the same database.
    var postgresOptions: [String] {
        guard let index = serveOptions.firstIndex(of: "--postgres"), index + 1 < serveOptions.count else { return [] }
        return ["--postgres", serveOptions[index + 1]]
    }

    /// A device token signed with the server's key.
    func token(user: String, device: String, teams: [String] = []) throws -> String {
        // The memberships go to the server's database: PostgreSQL's is named by the variable.
        let result = try SyncServerCommand.run(
            ["token", "--data", data.path, "--tenant", Stage.tenant, "--user", user, "--device", device] + teams.flatMap { ["--team", $0] },
            environment: postgresOptions.last.map { [PostgresStorage.environmentVariable: $0] } ?? [:], timeout: 60
        )
        guard result.status == 0 else { throw Failure("no token: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension CommandResult {
    /// Standard output as JSON.
    func json() throws -> JSON {
        try JSON(parsing: stdout, context: description)
    }
}

import Foundation
import OutpostTestSupport

/// The `sync-server` commands the scenes run on their server's data folder, in the demo tenant.
extension SyncServerProcess {
    /// Loads the sample content.
    func seed(team: String = "team-1") throws {
        let result = try command(["seed", "--data", data.path, "--tenant", Stage.tenant, "--team", team])
        guard result.status == 0 else { throw Failure("seeding failed: \(result)") }
    }

    /// A device token signed with the server's key.
    func token(user: String, device: String, teams: [String] = []) throws -> String {
        let result = try command(
            ["token", "--data", data.path, "--tenant", Stage.tenant, "--user", user, "--device", device] + teams.flatMap { ["--team", $0] }
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

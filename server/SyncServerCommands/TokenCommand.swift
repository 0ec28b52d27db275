import ArgumentParser
import Foundation
import SyncServer

struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a signed device (or admin) token.",
        discussion: """
            A JWT signed with the current key `serve` uses: --secret-file FILE, else \
            $\(TokenKey.environmentVariable), else the keys of --data DIR (DIR/\(TokenKey.fileName), created on first use, \
            and those of `keys rotate`). Send it as `Authorization: Bearer <token>`. With --data, each --team also \
            records the user as a member of that team on the server: the server authorizes team scopes by the \
            memberships it holds (`sync-server teams`), never by what a token says.
            """
    )

    @Option(help: "The tenant the device belongs to.")
    var tenant: String

    @Option(help: "The user id (fills {user_id} of the user scope).")
    var user: String

    @Option(help: "The device id (the rate limit counts per device).")
    var device: String

    @Option(name: .customLong("team"), help: "A team whose scope the device may read and write; repeat for several.")
    var teams: [String] = []

    @Flag(help: "An admin token: may publish and delete content and upload assets.")
    var admin = false

    @Flag(help: "An integration token, for a backend service: may read the tenant's change feed (GET /admin/v1/changes).")
    var integration = false

    @Option(help: "Seconds until the token expires (default one hour: devices ask their app for a new one; at most 366 days).")
    var ttl: Int64 = 3600

    @Option(help: "The audience the server expects (`aud`).")
    var audience = TokenSigner.defaultAudience

    /// The longest lifetime a token may be given.
    static let maximumTTL: Int64 = 366 * 86_400

    @Option(name: .customLong("data"), help: ArgumentHelp("The server's data folder, whose token.key signs the token.", valueName: "DIR"))
    var data: String?

    @Option(name: .customLong("secret-file"), help: ArgumentHelp("A file holding the token signing key.", valueName: "FILE"))
    var secretFile: String?

    func validate() throws {
        for (flag, value) in [("--tenant", tenant), ("--user", user), ("--device", device)] where value.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("\(flag) must not be empty")
        }
        if teams.contains(where: \.isEmpty) { throw ValidationError("--team must not be empty") }
        if admin, integration { throw ValidationError("give --admin or --integration, not both (an admin reads the change feed too)") }
        guard (1...Self.maximumTTL).contains(ttl) else {
            throw ValidationError("--ttl must be between 1 and \(Self.maximumTTL) seconds (366 days), not \(ttl)")
        }
        if data != nil, secretFile != nil { throw ValidationError("give --data or --secret-file, not both") }
        if data == nil, secretFile == nil, (ProcessInfo.processInfo.environment[TokenKey.environmentVariable] ?? "").isEmpty {
            throw ValidationError("give --data DIR (the server's data folder) or --secret-file FILE, or set \(TokenKey.environmentVariable)")
        }
    }

    func run() async throws {
        let directory = data.map { DataDirectory(URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath, isDirectory: true)) }
        var signer: TokenSigner
        do {
            let keyExisted = directory.map { FileManager.default.fileExists(atPath: $0.tokenKey.path) } ?? true
            signer = try TokenKey.signer(secretFile: secretFile.map { URL(fileURLWithPath: $0) }, dataDirectory: directory?.url)
            if !keyExisted, let directory, FileManager.default.fileExists(atPath: directory.tokenKey.path) {
                FileHandle.standardError.write(Data("note: created a new token key in \(directory.tokenKey.path)\n".utf8))
            }
        } catch {
            throw fail(error.description)
        }
        signer.audience = audience
        let now = Int64(Date().timeIntervalSince1970)
        let identity = DeviceIdentity(
            tenant: tenant, userID: user, deviceID: device, teams: teams, isAdmin: admin, isIntegration: integration, expiresAt: now + ttl)
        if !teams.isEmpty, let directory { try await recordMemberships(directory) }
        say(signer.sign(identity, issuedAt: now))
    }

    /// Adds the user to each --team in the server's database (the data folder's, or PostgreSQL's).
    private func recordMemberships(_ directory: DataDirectory) async throws {
        var options = try DataOptions.parse(["--data", directory.url.path])
        options.auditKeyFile = nil
        let storage = try await options.openStorage()
        let (tenant, user, teams) = (tenant, user, teams)
        do {
            try await storage.write { transaction in
                for team in teams { try await transaction.setTeamMembership(tenant: tenant, team: team, userID: user, isMember: true) }
            }
            await options.close(storage)
        } catch {
            await options.close(storage)
            throw fail("cannot record the team memberships: \(error)")
        }
    }
}

import ArgumentParser
import Foundation
import SyncServer

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a signed device (or admin) token.",
        discussion: """
            The token is signed with the same key `serve` uses: --secret-file FILE, else \
            $\(TokenKey.environmentVariable), else DIR/\(TokenKey.fileName) of --data DIR (created on first use). \
            Send it as `Authorization: Bearer <token>`.
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

    @Option(help: "Seconds until the token expires.")
    var ttl: Int64 = 30 * 24 * 3600

    @Option(name: .customLong("data"), help: ArgumentHelp("The server's data folder, whose token.key signs the token.", valueName: "DIR"))
    var data: String?

    @Option(name: .customLong("secret-file"), help: ArgumentHelp("A file holding the token signing key.", valueName: "FILE"))
    var secretFile: String?

    func validate() throws {
        for (flag, value) in [("--tenant", tenant), ("--user", user), ("--device", device)] where value.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("\(flag) must not be empty")
        }
        if teams.contains(where: \.isEmpty) { throw ValidationError("--team must not be empty") }
        guard ttl > 0 else { throw ValidationError("--ttl must be a positive number of seconds, not \(ttl)") }
        if data != nil, secretFile != nil { throw ValidationError("give --data or --secret-file, not both") }
        if data == nil, secretFile == nil, (ProcessInfo.processInfo.environment[TokenKey.environmentVariable] ?? "").isEmpty {
            throw ValidationError("give --data DIR (the server's data folder) or --secret-file FILE, or set \(TokenKey.environmentVariable)")
        }
    }

    func run() throws {
        let directory = data.map { DataDirectory(URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath, isDirectory: true)) }
        let signer: TokenSigner
        do {
            let keyExisted = directory.map { FileManager.default.fileExists(atPath: $0.tokenKey.path) } ?? true
            signer = try TokenKey.signer(secretFile: secretFile.map { URL(fileURLWithPath: $0) }, dataDirectory: directory?.url)
            if !keyExisted, let directory, FileManager.default.fileExists(atPath: directory.tokenKey.path) {
                FileHandle.standardError.write(Data("note: created a new token key in \(directory.tokenKey.path)\n".utf8))
            }
        } catch {
            throw fail(error.description)
        }
        let expiresAt = Int64(Date().timeIntervalSince1970) + ttl
        let identity = DeviceIdentity(tenant: tenant, userID: user, deviceID: device, teams: teams, isAdmin: admin, expiresAt: expiresAt)
        say(signer.sign(identity))
    }
}

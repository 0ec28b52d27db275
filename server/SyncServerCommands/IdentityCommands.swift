import ArgumentParser
import Foundation
import SyncServer

/// `sync-server keys`: the token signing keys of a data folder, and their rotation.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List, rotate and retire the token signing keys of a data folder.",
        discussion: """
            Rotation without logging anyone out: `keys rotate` adds a new key that signs new tokens; the earlier keys \\
            stay accepted. Once every token signed with an old key has expired (device tokens last an hour by \\
            default), `keys retire KID` stops accepting it. Running servers of the data folder read the keys again \\
            within seconds, and at once for a token of a key they do not know yet: no restart. See docs/security.md.
            """,
        subcommands: [List.self, Rotate.self, Retire.self]
    )

    struct Folder: ParsableArguments {
        @Option(name: .customLong("data"), help: ArgumentHelp("The server's data folder.", valueName: "DIR"))
        var path: String

        var url: URL { URL(fileURLWithPath: (path as NSString).expandingTildeInPath, isDirectory: true) }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the accepted keys, the current one marked.")
        @OptionGroup var folder: Folder

        func run() throws {
            do {
                let signer = try TokenKey.signer(secretFile: nil, dataDirectory: folder.url, environment: [:])
                for key in signer.acceptedKeys {
                    say("\(key.kid)\t\(key.algorithm)\(key.kid == signer.keyID ? "\tcurrent" : "")")
                }
            } catch {
                throw fail(error.description)
            }
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a new key that signs new tokens; earlier keys stay accepted.")
        @OptionGroup var folder: Folder

        func run() throws {
            do {
                say(try TokenKey.rotate(dataDirectory: folder.url))
            } catch {
                throw fail(error.description)
            }
        }
    }

    struct Retire: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop accepting a key (not the current one).")
        @OptionGroup var folder: Folder
        @Argument(help: "The key's kid, as `keys list` prints it.") var kid: String

        func run() throws {
            do {
                try TokenKey.retire(kid: kid, dataDirectory: folder.url)
            } catch {
                throw fail(error.description)
            }
        }
    }
}

/// `sync-server revoke`: refuse every token of a device or a user issued until now.
struct RevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Refuse every token of a device or user issued until now (401 token_revoked), on every server process.",
        discussion: "A token issued after the revocation is accepted again: re-enrol the device by issuing it a new token."
    )

    @OptionGroup var data: DataOptions
    @Option(help: "The tenant.") var tenant: String
    @Option(help: "The device to revoke.") var device: String?
    @Option(help: "The user to revoke (all their devices).") var user: String?

    func validate() throws {
        guard (device == nil) != (user == nil) else { throw ValidationError("give --device D or --user U (one of them)") }
        if tenant.isEmpty || device?.isEmpty == true || user?.isEmpty == true {
            throw ValidationError("--tenant, --device and --user must not be empty")
        }
    }

    func run() async throws {
        let storage = try await data.openStorage()
        let (kind, subject) = device.map { (RevocationKind.device, $0) } ?? (.user, user!)
        let (tenant, now) = (tenant, Int64(Date().timeIntervalSince1970))
        do {
            try await storage.write { try await $0.revoke(tenant: tenant, kind: kind, subject: subject, at: now) }
            await data.close(storage)
        } catch {
            await data.close(storage)
            throw fail("cannot record the revocation: \(error)")
        }
        say("revoked \(kind.rawValue) \(subject) of \(tenant): its tokens issued until now are refused")
    }
}

/// `sync-server teams`: the team memberships the server authorizes team scopes by.
struct TeamsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "teams",
        abstract: "Add, remove and list team members; a member removed loses the team's scope on their next request.",
        subcommands: [Add.self, Remove.self, List.self]
    )

    struct Member: ParsableArguments {
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String
        @Option(help: "The team.") var team: String
        @Option(help: "The user.") var user: String

        func set(_ isMember: Bool) async throws {
            guard !tenant.isEmpty, !team.isEmpty, !user.isEmpty else { throw ValidationError("--tenant, --team and --user must not be empty") }
            let storage = try await data.openStorage()
            let (tenant, team, user) = (tenant, team, user)
            let changed: Bool
            do {
                changed = try await storage.write { try await $0.setTeamMembership(tenant: tenant, team: team, userID: user, isMember: isMember) }
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot change the membership: \(error)")
            }
            // Removing someone who was not a member matched nothing: say so, never "done".
            if !isMember, !changed { throw fail("\(user) is not a member of team \(team) in tenant \(tenant); nothing was removed") }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a user a member of a team.")
        @OptionGroup var member: Member
        func run() async throws { try await member.set(true) }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user from a team.")
        @OptionGroup var member: Member
        func run() async throws { try await member.set(false) }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print team<TAB>user lines of a tenant.")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String

        func run() async throws {
            let storage = try await data.openStorage()
            let tenant = tenant
            do {
                let members = try await storage.read { try await $0.teamMemberships(tenant: tenant) }
                await data.close(storage)
                for member in members { say("\(member.team)\t\(member.user)") }
            } catch {
                await data.close(storage)
                throw fail("cannot read the memberships: \(error)")
            }
        }
    }
}

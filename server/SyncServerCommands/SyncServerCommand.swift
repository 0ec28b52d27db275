import ArgumentParser

struct SyncServerCommand: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        let program = SyncServerCommands.program
        let seed = program.seed == nil ? "" : "  \(program.name) seed --data ./data\n"
        return CommandConfiguration(
            commandName: program.name,
            abstract: "An Outpost sync server.",
            discussion: """
                Quick start:
                \(seed)  \(program.name) token --data ./data --tenant demo --user u-1 --device d-1
                  \(program.name) serve --data ./data --port 8080

                Exit codes:
                  0   success
                  1   audit verify: the audit log, or the archive given, is broken
                  2   failure: the data folder, token key or address cannot be used
                  64  usage error: an unknown flag, or a missing or invalid value
                """,
            subcommands: [
                ServeCommand.self, TokenCommand.self, KeysCommand.self, RevokeCommand.self, TeamsCommand.self, EraseCommand.self,
                ExportCommand.self,
            ] + (program.seed == nil ? [] : [SeedCommand.self]) + [
                AuditCommand.self, HousekeepingCommand.self, SinksCommand.self, FleetCommand.self,
            ]
        )
    }
}

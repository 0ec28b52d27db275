import ArgumentParser

@main
struct SyncServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "The Outpost reference sync server.",
        discussion: """
            Quick start:
              sync-server seed --data ./data
              sync-server token --data ./data --tenant demo --user u-1 --device d-1
              sync-server serve --data ./data --port 8080

            Exit codes:
              0   success
              1   audit verify: the audit log, or the archive given, is broken
              2   failure: the data folder, token key or address cannot be used
              64  usage error: an unknown flag, or a missing or invalid value

            Guide: docs/server.md. Routes: docs/openapi.yaml.
            """,
        subcommands: [
            ServeCommand.self, TokenCommand.self, KeysCommand.self, RevokeCommand.self, TeamsCommand.self, EraseCommand.self, ExportCommand.self,
            SeedCommand.self, AuditCommand.self, HousekeepingCommand.self, SinksCommand.self, FleetCommand.self,
        ]
    )
}

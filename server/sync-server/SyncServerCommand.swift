import ArgumentParser

@main
struct SyncServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "The Outpost reference sync server."
    )
}

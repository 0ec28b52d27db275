import ArgumentParser
import Foundation
import SyncServer

struct SeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seed",
        abstract: "Load the server's sample content.",
        discussion: "Idempotent: rows already stored as the sample has them are left alone. Run it with the server stopped or running."
    )

    @OptionGroup var data: DataOptions

    @Option(help: "The tenant to load the sample into.")
    var tenant = "demo"

    @Option(help: "The team whose scope gets the field-service sample.")
    var team = "team-1"

    func validate() throws {
        if tenant.isEmpty || team.isEmpty { throw ValidationError("--tenant and --team must not be empty") }
    }

    func run() async throws {
        guard let seed = SyncServerCommands.program.seed else { throw fail("this server has no sample content") }
        let storage = try await data.openStorage()
        do {
            let summary = try await seed(storage, tenant, team)
            await data.close(storage)
            say(summary)
        } catch {
            await data.close(storage)
            throw fail("seeding failed: \(error)")
        }
    }
}

public import ContractRuntime
public import Foundation
import NIOConcurrencyHelpers
public import SyncServer

/// What makes a team's server its own: its contracts and apps. Everything else, every
/// subcommand, flag and route of `sync-server` and the console, comes with ``SyncServerCommands``.
///
/// An adopter's whole `main.swift`:
///
/// ```swift
/// import NotesContracts
/// import SyncServerCommands
///
/// await SyncServerCommands.main(SyncServerProgram(name: "notes-server", contracts: ContractRegistry.self))
/// ```
public struct SyncServerProgram: Sendable {
    /// Loads a server's sample content into `storage` for `tenant` (and `team`'s scope), and
    /// says what it loaded: what `seed` runs.
    public typealias Seed = @Sendable (_ storage: any ServerStorage, _ tenant: String, _ team: String) async throws -> String
    /// Runs once when `serve` has opened the storage, before it listens (to move what an older
    /// release kept elsewhere, say); answers a line to print, or `nil`.
    public typealias Preparation = @Sendable (_ storage: any ServerStorage, _ files: FileLimits, _ dataFolder: URL) async throws -> String?

    /// The command's name in its help and usage lines.
    public var name: String
    /// The contracts the server's storage creates and every route checks.
    public var contracts: ContractCatalog
    /// The apps whose routes, scopes and sinks the server adds to the engine's.
    public var apps: [any ServerApp]
    /// What `seed` loads; without one the command has no `seed`.
    public var seed: Seed?
    /// What `serve` does before it listens.
    public var preparation: Preparation?

    /// A server of `contracts` with `apps`, named `name` in its help.
    public init(
        name: String = "sync-server", contracts: any ContractSchema.Type, apps: [any ServerApp] = [], seed: Seed? = nil,
        preparation: Preparation? = nil
    ) {
        self.name = name
        self.contracts = ContractCatalog(contracts)
        self.apps = apps
        self.seed = seed
        self.preparation = preparation
    }
}

/// The `sync-server` command, for any team's contracts and apps.
public enum SyncServerCommands {
    /// Parses the process's arguments and runs the subcommand they name against `program`;
    /// exits with the command's code (0, 1 for a broken audit log, 2 for a failure, 64 for usage).
    public static func main(_ program: SyncServerProgram) async {
        current.withLockedValue { $0 = program }
        await SyncServerCommand.main()
    }

    private static let current = NIOLockedValueBox<SyncServerProgram?>(nil)

    /// The program ``main(_:)`` runs.
    static var program: SyncServerProgram {
        guard let program = current.withLockedValue({ $0 }) else {
            preconditionFailure("SyncServerCommands.main(_:) sets the program before any command runs")
        }
        return program
    }
}

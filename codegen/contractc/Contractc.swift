import ArgumentParser
import ContractCompiler
import Foundation

@main
struct Contractc: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contractc",
        abstract: "The Outpost contract compiler: YAML contracts in, Swift DTOs and SQLite migrations out.",
        discussion: """
            Exit codes: 0 success (warnings allowed); 1 the contracts have errors, break compatibility, \
            raise an oldest_supported that cuts off more of the fleet than --max-cutoff, or the generated \
            code is out of date; 2 an output folder that cannot be written, a git command that failed, \
            or a fleet census that cannot be read or fetched; 64 bad command-line usage.
            """,
        subcommands: [Init.self, Validate.self, Generate.self, Check.self, Lock.self, Explain.self, Schema.self],
        defaultSubcommand: nil
    )
}

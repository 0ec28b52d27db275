import ArgumentParser
import ContractCompiler
import Foundation

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the current version of every contract as released, with its migrations' checksums.",
        discussion: "Refuses when `contractc check` finds an error: a released version is never overwritten."
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    func run() throws {
        let loaded = options.load()
        guard let set = loaded.contracts, !loaded.diagnostics.hasErrors else {
            report(loaded.diagnostics, format: options.format)
            throw ExitCode(1)
        }
        let path = lockOption.path(contracts: options.contracts)
        let (summary, diagnostics) = ContractCompiler.lock(set, lockPath: path)
        report(diagnostics, format: options.format)
        guard let summary else { throw ExitCode(1) }
        if summary.newVersions.isEmpty {
            print(summary.wrote ? "Updated \(path); no new contract versions." : "\(path) is up to date.")
        } else {
            print("Locked in \(path): \(summary.newVersions.joined(separator: ", ")).")
        }
    }
}

import ArgumentParser
import ContractCompiler
import Foundation

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every contract and print every problem; writes nothing."
    )

    @OptionGroup var options: ContractOptions

    func run() throws {
        let result = options.load()
        report(result.diagnostics, format: options.format)
        if result.diagnostics.hasErrors || result.contracts == nil { throw ExitCode(1) }
        if options.format == .text {
            print("\(result.contracts!.contracts.count) contracts are valid.")
        }
    }
}

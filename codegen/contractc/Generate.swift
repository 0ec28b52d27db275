import ArgumentParser
import ContractCompiler
import Foundation

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate the contracts and generate Swift code into the output folder."
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    @Option(name: .long, help: "The folder to generate into; the generator owns it.")
    var output: String = "Sources/Contracts"

    @Flag(name: .long, help: "Write nothing; exit 1 if the output folder is not exactly what would be generated.")
    var check = false

    func run() throws {
        var result = options.load()
        let history = ContractCompiler.history(lockPath: lockOption.path(contracts: options.contracts), diagnostics: &result.diagnostics)
        report(result.diagnostics, format: options.format)
        guard let set = result.contracts, !result.diagnostics.hasErrors else { throw ExitCode(1) }
        let files = ContractCompiler.generate(set, history: history)
        if check {
            let stale = ContractCompiler.differences(files, in: output)
            if stale.isEmpty {
                print("\(output) is up to date (\(files.count) files).")
                return
            }
            FileHandle.standardError.write(
                Data(
                    ("error: \(output) is out of date:\n" + stale.map { "  \($0)" }.joined(separator: "\n")
                        + "\nhelp: run `contractc generate --contracts \(options.contracts) --output \(output)` (or `swift package "
                        + "generate-contracts`) and commit the result\n").utf8))
            throw ExitCode(1)
        }
        do {
            let summary = try ContractCompiler.write(files, to: output)
            if summary.written.isEmpty && summary.removed.isEmpty {
                print("\(output) is up to date (\(files.count) files).")
            } else {
                print(
                    "Generated \(files.count) files into \(output): \(summary.written.count) written, "
                        + "\(summary.unchanged.count) unchanged, \(summary.removed.count) removed."
                )
            }
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}

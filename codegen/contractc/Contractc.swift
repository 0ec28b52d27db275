import ArgumentParser
import ContractCompiler
import Foundation

@main
struct Contractc: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contractc",
        abstract: "The Outpost contract compiler: YAML contracts in, Swift DTOs and SQLite migrations out.",
        discussion: """
            Exit codes: 0 success (warnings allowed), 1 the contracts have errors or the generated \
            code is out of date, 2 bad command-line usage or an output folder that cannot be written.
            """,
        subcommands: [Validate.self, Generate.self],
        defaultSubcommand: nil
    )
}

struct ContractOptions: ParsableArguments {
    @Option(name: .long, help: "The contracts folder (holds contracts.yaml).")
    var contracts: String = "contracts"

    @Option(name: .customLong("format"), help: "Diagnostics format: text, json or github.")
    var formatOption: FormatOption = .text

    var format: DiagnosticFormat { formatOption.format }
}

enum FormatOption: String, ExpressibleByArgument, CaseIterable {
    case text, json, github

    var format: DiagnosticFormat { DiagnosticFormat(rawValue: rawValue)! }
}

/// Prints diagnostics to standard error and says whether the run may go on.
func report(_ diagnostics: DiagnosticCollector, format: DiagnosticFormat) {
    let text = format.render(diagnostics)
    guard !text.isEmpty else { return }
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every contract and print every problem; writes nothing."
    )

    @OptionGroup var options: ContractOptions

    func run() throws {
        let result = ContractCompiler.load(directory: options.contracts)
        report(result.diagnostics, format: options.format)
        if result.diagnostics.hasErrors || result.contracts == nil { throw ExitCode(1) }
        if options.format == .text {
            print("\(result.contracts!.contracts.count) contracts are valid.")
        }
    }
}

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate the contracts and generate Swift code into the output folder."
    )

    @OptionGroup var options: ContractOptions

    @Option(name: .long, help: "The folder to generate into; the generator owns it.")
    var output: String = "Sources/Contracts"

    @Flag(name: .long, help: "Write nothing; exit 1 if the output folder is not exactly what would be generated.")
    var check = false

    func run() throws {
        let result = ContractCompiler.load(directory: options.contracts)
        report(result.diagnostics, format: options.format)
        guard let set = result.contracts, !result.diagnostics.hasErrors else { throw ExitCode(1) }
        let files = ContractCompiler.generate(set)
        if check {
            let stale = ContractCompiler.differences(files, in: output)
            if stale.isEmpty {
                print("\(output) is up to date (\(files.count) files).")
                return
            }
            FileHandle.standardError.write(Data((
                "error: \(output) is out of date:\n" + stale.map { "  \($0)" }.joined(separator: "\n")
                    + "\nhelp: run `make codegen` and commit the result\n"
            ).utf8))
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

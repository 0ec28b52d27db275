import ArgumentParser
import ContractCompiler
import Foundation

struct ContractOptions: ParsableArguments {
    @Option(name: .long, help: "The contracts folder (holds contracts.yaml).")
    var contracts: String = "contracts"

    @Option(name: .customLong("format"), help: "Diagnostics format: text, json or github.")
    var formatOption: FormatOption = .text

    var format: DiagnosticFormat { formatOption.format }

    @Option(name: .long, help: ArgumentHelp("The date allowances are checked against (YYYY-MM-DD); today in UTC by default.", visibility: .hidden))
    var today: String?

    func load() -> ContractCompiler.LoadResult {
        ContractCompiler.load(directory: contracts, today: today)
    }
}

struct LockOption: ParsableArguments {
    @Option(name: .long, help: "The lock file (default: contracts.lock in the contracts folder).")
    var lock: String?

    func path(contracts: String) -> String {
        lock ?? ContractCompiler.defaultLockPath(contracts: contracts)
    }
}

enum FormatOption: String, ExpressibleByArgument, CaseIterable {
    case text, json, github

    var format: DiagnosticFormat { DiagnosticFormat(rawValue: rawValue)! }
}

import Foundation
import PackagePlugin

/// `swift package generate-contracts`: regenerates a package's contract module with `contractc`,
/// without a Makefile.
///
///     swift package --allow-writing-to-package-directory generate-contracts \
///         [--contracts contracts] [--output Sources/Contracts] [--check]
///
/// `--contracts` is the contracts folder and `--output` the module's folder, both relative to the
/// package (`contracts` and `Sources/Contracts` by default); `contract.schema.json` and the files'
/// first lines are brought up to date beside the contracts. With `--check` nothing is written and
/// the command fails when either is out of date.
@main
struct GenerateContracts: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        let contracts = context.package.directoryURL.appending(path: extractor.extractOption(named: "contracts").last ?? "contracts")
        let output = context.package.directoryURL.appending(path: extractor.extractOption(named: "output").last ?? "Sources/Contracts")
        let check = extractor.extractFlag(named: "check") > 0
        guard extractor.remainingArguments.isEmpty else {
            throw PluginFailure(
                "unknown arguments: \(extractor.remainingArguments.joined(separator: " ")) (expected --contracts DIR, --output DIR, --check)")
        }
        let contractc = try context.tool(named: "contractc").url
        try run(contractc, ["generate", "--contracts", contracts.path, "--output", output.path] + (check ? ["--check"] : []))
        try run(contractc, ["schema", "--contracts", contracts.path] + (check ? ["--check"] : []))
    }

    private func run(_ tool: URL, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = tool
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw PluginFailure("contractc \(arguments.first ?? "") exited \(process.terminationStatus)")
        }
    }
}

struct PluginFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

import ContractCompiler
package import Foundation

/// The sample contracts (`contracts/`), read once: each file with the name of its contract, and
/// the released history of `contracts/contracts.lock`.
private struct SampleContracts: Sendable {
    var directory: String
    var manifest: ContractLoader.SourceFile
    var files: [(name: String, file: ContractLoader.SourceFile)]
    var lock: LockFile

    static let shared: SampleContracts = {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("contracts").path
        var diagnostics = DiagnosticCollector()
        let sources = ContractLoader().sources(in: directory, diagnostics: &diagnostics)
        let loaded = ContractCompiler.load(directory: directory)
        guard let manifest = sources.manifest, let set = loaded.contracts, !loaded.diagnostics.hasErrors,
            let lock = LockFile.read(path: ContractCompiler.defaultLockPath(contracts: directory), diagnostics: &diagnostics),
            !diagnostics.hasErrors
        else {
            fatalError("the sample contracts in \(directory) do not load:\n\(loaded.diagnostics.renderedReport())\(diagnostics.renderedReport())")
        }
        let files = sources.contracts.map { file in
            let relative = file.displayPath.dropFirst(directory.count).drop { $0 == "/" }
            let name = set.contracts.first { $0.sourcePath.hasSuffix("/" + relative) }?.name ?? ""
            return (name: name, file: file)
        }
        return SampleContracts(directory: directory, manifest: manifest, files: files, lock: lock)
    }()
}

/// A contract file put in place of its namesake among the sample contracts, as a developer
/// editing it would, then what `contractc` does with the folder: load and validate the whole
/// set, check it against the released history in `contracts.lock` (`contractc check`), and
/// generate its code with that history (`contractc generate`). Properties: nothing traps; a set
/// that loads without errors is checked and generates its files.
package func fuzzContractSet(_ data: Data) throws(PropertyViolation) {
    let samples = SampleContracts.shared
    let input = ContractLoader.SourceFile(displayPath: samples.directory + "/entities/fuzzed.yaml", bytes: [UInt8](data))
    let alone = ContractCompiler.load((manifest: samples.manifest, contracts: [input]), directory: samples.directory, today: "2026-01-31")
    guard let name = alone.contracts?.contracts.first?.name else { return }
    let others = samples.files.filter { $0.name != name }.map(\.file)
    let loaded = ContractCompiler.load(
        (manifest: samples.manifest, contracts: others + [input]), directory: samples.directory, today: "2026-01-31"
    )
    try check(
        loaded.contracts?.contracts.count == others.count + 1 || loaded.diagnostics.hasErrors,
        "a contract went missing from the set without an error:\n\(loaded.diagnostics.renderedReport())"
    )
    guard !loaded.diagnostics.hasErrors, let set = loaded.contracts else { return }
    let checked = ContractCompiler.check(set, lock: samples.lock)
    _ = checked.diagnostics.renderedReport()
    let files = ContractCompiler.generate(set, history: samples.lock.history)
    try check(files.count > set.contracts.count, "a valid set generated \(files.count) files for \(set.contracts.count) contracts")
}

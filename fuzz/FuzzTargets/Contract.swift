import ContractCompiler
package import Foundation

/// The manifest a fuzzed contract file is checked against: the scopes of the sample contracts.
private let manifest = Array(
    """
    scopes:
      content: { key: "content:global", access: read }
      user: { key: "progress:user:{user_id}" }
      team: { key: "ops:team:{team_id}" }
    compatibility:
      entities: full
      events: backward
    """.utf8
)

/// A contract file (`contracts/entities/*.yaml`) read by the compiler exactly as
/// `contractc` reads it once the folder is read (``ContractCompiler/load(_:directory:today:diagnostics:)``):
/// parsed with libyaml, decoded, validated against a fixed manifest; the same bytes are also
/// read as the manifest. Properties: nothing traps; a file that yields no contract says why
/// with at least one error; a contract that loads without errors generates its code.
package func fuzzContract(_ data: Data) throws(PropertyViolation) {
    let bytes = [UInt8](data)
    let directory = "fuzz/contracts"
    let asContract = ContractCompiler.load(
        (
            manifest: ContractLoader.SourceFile(displayPath: "\(directory)/contracts.yaml", bytes: manifest),
            contracts: [ContractLoader.SourceFile(displayPath: "\(directory)/entities/input.yaml", bytes: bytes)]
        ),
        directory: directory, today: "2026-01-31"
    )
    let loaded = asContract.contracts?.contracts.count ?? 0
    try check(
        loaded == 1 || asContract.diagnostics.hasErrors,
        "the file gave no contract and no error:\n\(asContract.diagnostics.renderedReport())"
    )
    _ = asContract.diagnostics.renderedReport()
    if !asContract.diagnostics.hasErrors, let set = asContract.contracts {
        let files = ContractCompiler.generate(set)
        try check(!files.isEmpty, "a valid contract generated no files")
    }

    let asManifest = ContractCompiler.load(
        (manifest: ContractLoader.SourceFile(displayPath: "\(directory)/contracts.yaml", bytes: bytes), contracts: []),
        directory: directory, today: "2026-01-31"
    )
    _ = asManifest.diagnostics.renderedReport()
}

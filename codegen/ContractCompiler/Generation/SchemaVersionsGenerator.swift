/// Renders `CURRENT_<NAME>_SCHEMA` and `OLDEST_SUPPORTED_<NAME>_SCHEMA` for every contract.
struct SchemaVersionsGenerator {
    let set: ContractSet

    func render() -> String {
        var w = CodeWriter()
        for (index, contract) in set.contracts.enumerated() {
            if index > 0 { w.line() }
            let constant = Names.screamingSnakeCase(contract.name)
            w.line("/// The `\(contract.name)` schema version this build reads and writes.")
            w.line("public let CURRENT_\(constant)_SCHEMA = \(contract.version)")
            w.line("/// The oldest `\(contract.name)` schema version still supported; older rows are purged and re-fetched.")
            w.line("public let OLDEST_SUPPORTED_\(constant)_SCHEMA = \(contract.oldestSupported)")
        }
        return w.text
    }
}

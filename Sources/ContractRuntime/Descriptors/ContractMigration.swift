/// One generated migration: an identifier that never changes once released, and plain SQL.
public struct ContractMigration: Hashable, Sendable {
    /// For example `units.v3.create`.
    public var identifier: String
    public var contract: String
    public var version: Int
    public var statements: [String]
    /// SHA-256 of the statements, as recorded in `contracts.lock` once released.
    public var checksum: String

    public init(identifier: String, contract: String, version: Int, statements: [String], checksum: String) {
        self.identifier = identifier
        self.contract = contract
        self.version = version
        self.statements = statements
        self.checksum = checksum
    }
}

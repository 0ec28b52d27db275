/// One generated migration: an identifier that never changes once released, and plain SQL.
public struct ContractMigration: Hashable, Sendable {
    /// For example `units.v3.create`.
    public var identifier: String
    /// The contract the migration belongs to.
    public var contract: String
    /// The contract version it migrates to.
    public var version: Int
    /// The SQL statements, run in order.
    public var statements: [String]
    /// SHA-256 of the statements, as recorded in `contracts.lock` once released.
    public var checksum: String

    /// A migration from its parts, as generated code lists them.
    public init(identifier: String, contract: String, version: Int, statements: [String], checksum: String) {
        self.identifier = identifier
        self.contract = contract
        self.version = version
        self.statements = statements
        self.checksum = checksum
    }
}

/// Renders the client or server migrations as plain SQL in Swift literals.
struct MigrationsGenerator {
    let set: ContractSet
    var history: [String: [Contract]] = [:]

    func render(side: StorageSide) -> String {
        let steps = MigrationPlanner(set: set, history: history).migrations(side: side)
        var w = CodeWriter()
        w.line("public import ContractRuntime")
        w.line()
        w.block("extension ContractRegistry") { w in
            switch side {
            case .client, .server: w.line("/// The \(side.rawValue)'s SQLite migrations, in the order they must run.")
            case .serverPostgres: w.line("/// The server's migrations in PostgreSQL's dialect, in the order they must run.")
            }
            w.line("///")
            w.line("/// Identifiers never change once released; register them with a migrator as they are.")
            w.line("public static let \(side.registryProperty): [ContractMigration] = [")
            w.indent { w in
                for step in steps {
                    w.line("ContractMigration(")
                    w.indent { w in
                        w.line("identifier: \(SwiftLiteral.string(step.identifier)),")
                        w.line("contract: \(SwiftLiteral.string(step.contract)),")
                        w.line("version: \(step.version),")
                        w.line("statements: [")
                        w.indent { w in
                            for statement in step.statements {
                                let literal = SwiftLiteral.rawMultiline(statement, indent: "")
                                let lines = literal.split(separator: "\n", omittingEmptySubsequences: false)
                                for (index, line) in lines.enumerated() {
                                    w.line(String(line) + (index == lines.count - 1 ? "," : ""))
                                }
                            }
                        }
                        w.line("],")
                        w.line("checksum: \(SwiftLiteral.string(step.checksum))")
                    }
                    w.line("),")
                }
            }
            w.line("]")
        }
        return w.text
    }
}

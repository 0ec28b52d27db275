import Crypto
import Foundation

/// A table as the migrations create it: the structure migrations are derived from.
package struct TableSchema: Hashable, Sendable {
    package struct Column: Hashable, Sendable {
        package var name: String
        package var sqlType: String
        package var isNotNull: Bool
        package var defaultSQL: String?

        package var definition: String {
            var text = TypeMapping.quoted(name) + " " + sqlType
            if isNotNull { text += " NOT NULL" }
            if let defaultSQL { text += " DEFAULT " + defaultSQL }
            return text
        }
    }

    package struct IndexSchema: Hashable, Sendable {
        package var name: String
        package var columns: [String]
        package var isUnique: Bool

        package var createStatement: String {
            "CREATE \(isUnique ? "UNIQUE " : "")INDEX \(TypeMapping.quoted(name)) ON {table} ("
                + columns.map(TypeMapping.quoted).joined(separator: ", ") + ")"
        }
    }

    package var name: String
    package var columns: [Column]
    package var primaryKey: [String]
    package var indexes: [IndexSchema]

    package var createStatements: [String] {
        var body = columns.map { "    " + $0.definition }
        body.append("    PRIMARY KEY (" + primaryKey.map(TypeMapping.quoted).joined(separator: ", ") + ")")
        var statements = ["CREATE TABLE \(TypeMapping.quoted(name)) (\n" + body.joined(separator: ",\n") + "\n)"]
        statements += indexes.map { $0.createStatement.replacingOccurrences(of: "{table}", with: TypeMapping.quoted(name)) }
        return statements
    }

    /// An index name that stays within PostgreSQL's 63 characters, stable for the same inputs.
    package static func indexName(table: String, columns: [String], unique: Bool) -> String {
        let suffix = unique ? "_key" : "_idx"
        let base = table + "_" + columns.map { $0.hasPrefix("_") ? String($0.dropFirst()) : $0 }.joined(separator: "_")
        if base.count + suffix.count <= Names.maximumIdentifierLength { return base + suffix }
        let digest = SHA256.hash(data: Data((base + suffix).utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
        return String(base.prefix(Names.maximumIdentifierLength - suffix.count - 9)) + "_" + digest + suffix
    }
}

extension TableSchema.IndexSchema {
    /// The index with renamed columns, to tell a renamed column's index from a changed one.
    func renamed(_ renames: [String: String]) -> TableSchema.IndexSchema {
        var copy = self
        copy.columns = columns.map { renames[$0] ?? $0 }
        return copy
    }
}

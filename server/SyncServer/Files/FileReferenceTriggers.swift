import ContractRuntime
import SyncProtocol

/// The record of which rows name which file: whenever a row of a contract with `file` fields
/// is written or deleted, the database itself (a trigger on the contract table, whatever
/// statement wrote it: a push, a reducer, published content, an erasure) replaces the row's
/// entries in `file_references` with one per file field that names a file (its SHA-256, and the
/// row's scope key). The file routes read it to decide who may read a file (an identity that
/// may read a scope holding a row that names it) and housekeeping to find the files nothing
/// names any more.
///
/// As ``RowMoves``' triggers, these are derived from the contracts each time a storage opens,
/// so a contract that gains a file field needs no migration of the server's own.
enum FileReferenceTriggers {
    static let table = EngineNames.ServerTable.fileReferences.rawValue

    /// The prefix of every trigger (and PostgreSQL function) this derives.
    static let triggerPrefix = "outpost_files_"

    /// The contract tables with `file` fields: (table, primary key column, file fields).
    static func fileTables(of contracts: ContractCatalog) -> [(table: String, primaryKey: String, fields: [String])] {
        var tables: [(String, String, [String])] = []
        for entity in contracts.entities {
            let fields = entity.fields.filter { $0.kind == .file }.map(\.name)
            if !fields.isEmpty { tables.append((entity.table, entity.primaryKey, fields.sorted())) }
        }
        for event in contracts.events {
            let fields = event.fields.filter { $0.kind == .file }.map(\.name)
            if !fields.isEmpty { tables.append((event.table, "event_id", fields.sorted())) }
        }
        return tables.sorted { $0.0 < $1.0 }
    }

    /// Statements that install the triggers for `contracts`, after those that drop any this
    /// prefix names (`existing`, as the database lists them): run in one transaction at startup.
    static func statements(for contracts: ContractCatalog, dialect: RowMoves.Dialect, existing: [(trigger: String, table: String)]) -> [String] {
        var statements: [String] = []
        for (trigger, table) in existing {
            switch dialect {
            case .sqlite: statements.append("DROP TRIGGER IF EXISTS \(SubscriptionPlan.quoted(trigger))")
            case .postgres: statements.append("DROP TRIGGER IF EXISTS \(SubscriptionPlan.quoted(trigger)) ON \(SubscriptionPlan.quoted(table))")
            }
        }
        let columns = "(\"tenant\", \"table_name\", \"row_id\", \"field_name\", \"sha256\", \"scope_key\")"
        for (table, primaryKey, fields) in fileTables(of: contracts) {
            let (t, pk) = (SubscriptionPlan.quoted(table), SubscriptionPlan.quoted(primaryKey))
            let name = table.replacingOccurrences(of: "'", with: "''")
            switch dialect {
            case .sqlite:
                let forget =
                    "DELETE FROM \"\(Self.table)\" WHERE \"tenant\" = OLD.\"_tenant_id\" AND \"table_name\" = '\(name)' AND \"row_id\" = CAST(OLD.\(pk) AS TEXT);"
                let clearNew =
                    "DELETE FROM \"\(Self.table)\" WHERE \"tenant\" = NEW.\"_tenant_id\" AND \"table_name\" = '\(name)' AND \"row_id\" = CAST(NEW.\(pk) AS TEXT);"
                let record: String = fields.map { field -> String in
                    let f = SubscriptionPlan.quoted(field)
                    return """
                        INSERT INTO "\(Self.table)" \(columns)
                        SELECT NEW."_tenant_id", '\(name)', CAST(NEW.\(pk) AS TEXT), '\(field)', json_extract(NEW.\(f), '$.sha256'), NEW."_scope_key"
                        WHERE NEW.\(f) IS NOT NULL AND json_valid(NEW.\(f)) AND json_extract(NEW.\(f), '$.sha256') IS NOT NULL;
                        """
                }.joined(separator: "\n")
                // Rows are written with `INSERT OR REPLACE`, whose delete fires no trigger: the
                // insert's trigger clears the row's entries before it records them.
                statements.append(
                    "CREATE TRIGGER \"\(triggerPrefix)\(table)_insert\" AFTER INSERT ON \(t) FOR EACH ROW BEGIN\n\(clearNew)\n\(record)\nEND")
                statements.append(
                    "CREATE TRIGGER \"\(triggerPrefix)\(table)_update\" AFTER UPDATE ON \(t) FOR EACH ROW BEGIN\n\(forget)\n\(clearNew)\n\(record)\nEND"
                )
                statements.append("CREATE TRIGGER \"\(triggerPrefix)\(table)_delete\" AFTER DELETE ON \(t) FOR EACH ROW BEGIN\n\(forget)\nEND")
            case .postgres:
                let function = "\(triggerPrefix)\(table)"
                let record: String = fields.map { field -> String in
                    let f = SubscriptionPlan.quoted(field)
                    return """
                        IF NEW.\(f) IS NOT NULL AND (NEW.\(f)::text::json ->> 'sha256') IS NOT NULL THEN
                            INSERT INTO "\(Self.table)" \(columns)
                            VALUES (NEW."_tenant_id", '\(name)', NEW.\(pk)::text, '\(field)', NEW.\(f)::text::json ->> 'sha256', NEW."_scope_key");
                        END IF;
                        """
                }.joined(separator: "\n")
                statements.append(
                    """
                    CREATE OR REPLACE FUNCTION "\(function)"() RETURNS trigger LANGUAGE plpgsql AS $files$
                    BEGIN
                    IF TG_OP <> 'INSERT' THEN
                        DELETE FROM "\(Self.table)" WHERE "tenant" = OLD."_tenant_id" AND "table_name" = '\(name)' AND "row_id" = OLD.\(pk)::text;
                    END IF;
                    IF TG_OP <> 'DELETE' THEN
                        DELETE FROM "\(Self.table)" WHERE "tenant" = NEW."_tenant_id" AND "table_name" = '\(name)' AND "row_id" = NEW.\(pk)::text;
                    \(record)
                    END IF;
                    RETURN NULL;
                    END
                    $files$
                    """)
                statements.append(
                    "CREATE TRIGGER \"\(function)\" AFTER INSERT OR UPDATE OR DELETE ON \(t) FOR EACH ROW EXECUTE FUNCTION \"\(function)\"()")
            }
        }
        return statements
    }

    /// Lists this prefix's triggers: (trigger, table).
    static func existingTriggersSQL(_ dialect: RowMoves.Dialect) -> String {
        RowMoves.existingTriggersSQL(dialect).replacingOccurrences(of: RowMoves.triggerPrefix, with: triggerPrefix)
    }
}

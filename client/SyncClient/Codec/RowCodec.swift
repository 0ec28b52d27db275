import ContractRuntime
import Foundation
import GRDB

/// Rows of contract tables ↔ wire objects, sealing `encrypted` fields on the way in and
/// opening them on the way out. Built on ``ColumnCodec``.
struct RowCodec: Sendable {
    let crypto: StoreCrypto
    let columns: ColumnCodec

    /// The column values of `fields` for a row, from a wire object.
    ///
    /// - Parameters:
    ///   - missing: what a field absent from `wire` becomes: `.defaults` (its contract default,
    ///     else NULL — for whole rows) or `.skip` (left out — for patches).
    func columns(
        contract: String, table: String, id: String, fields: [FieldDescriptor], wire: [String: JSONValue],
        mode: ColumnCodec.Mode, missing: MissingFields
    ) throws(OfflineStoreError) -> [(name: String, value: DatabaseValue)] {
        var columns: [(name: String, value: DatabaseValue)] = []
        columns.reserveCapacity(fields.count)
        for field in fields {
            let value: JSONValue
            if let given = wire[field.name] {
                value = given
            } else if missing == .skip {
                continue
            } else {
                value = field.defaultValue ?? .null
            }
            columns.append((field.name, try columnValue(value, for: field, contract: contract, table: table, id: id, mode: mode)))
        }
        return columns
    }

    enum MissingFields {
        case defaults
        case skip
    }

    /// One field's column value, sealed when the field is encrypted.
    func columnValue(
        _ value: JSONValue, for field: FieldDescriptor, contract: String, table: String, id: String, mode: ColumnCodec.Mode
    ) throws(OfflineStoreError) -> DatabaseValue {
        let stored: DatabaseValue
        do {
            stored = try columns.columnValue(value, for: field, mode: mode)
        } catch {
            throw .refusal(error, field: field, value: value, contract: contract)
        }
        guard field.isEncrypted, !stored.isNull else { return stored }
        // Sealed: the canonical JSON of the normalized wire value.
        let normalized = columns.wireValue(stored, for: field)
        do {
            let sealed = try crypto.sealField(
                Data(CanonicalJSON.text(normalized).utf8), table: table, column: field.name, id: id
            )
            return sealed.databaseValue
        } catch {
            throw .invalidValue(contract: contract, field: field.name, reason: "cannot be sealed")
        }
    }

    /// One field's wire value from its column, opened when the field is encrypted.
    func wireValue(_ stored: DatabaseValue, for field: FieldDescriptor, table: String, id: String) throws(OfflineStoreError) -> JSONValue {
        guard field.isEncrypted, !stored.isNull else { return columns.wireValue(stored, for: field) }
        guard case .blob(let sealed) = stored.storage,
            let plaintext = try? crypto.openField(sealed, table: table, column: field.name, id: id),
            let value = ColumnCodec.parseJSON(plaintext)
        else {
            throw .unsealFailed(table: table, column: field.name, id: id)
        }
        return value
    }

    /// The wire object of `fields` read from a row.
    func wireObject(_ row: Row, fields: [FieldDescriptor], table: String, id: String) throws(OfflineStoreError) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        object.reserveCapacity(fields.count)
        for field in fields {
            let stored: DatabaseValue = row[field.name] ?? .null
            object[field.name] = try wireValue(stored, for: field, table: table, id: id)
        }
        return object
    }

    /// The primary key of a row as text.
    func key(of row: Row, entity: EntityDescriptor) -> String {
        let kind = entity.field(named: entity.primaryKey)?.kind ?? .id
        let stored: DatabaseValue = row[entity.primaryKey] ?? .null
        return columns.keyText(columns.wireValue(stored, kind: kind), kind: kind) ?? ""
    }
}

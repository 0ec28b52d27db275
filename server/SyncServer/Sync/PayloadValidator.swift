import ContractRuntime
import SyncProtocol

/// What the validator needs to know about a contract, entity or event alike, with the lookups
/// it makes for every payload worked out once.
struct PayloadContract: Sendable {
    var name: String
    var fields: [FieldDescriptor]
    var currentVersion: Int
    var knownFieldsByVersion: [Int: [KnownField]]
    /// The primary-key field of an entity; `nil` for an event (its id travels in the envelope).
    var primaryKey: String?
    /// The field the server stamps on every write (`updated_at`, `revision`); devices may leave it out.
    var versionField: String?
    /// The most bytes a row of the contract may hold (its `max_bytes`, `RowSize`).
    var maxBytes: Int
    /// Per version with a known-field list: each wire name of that version → the position in
    /// ``fields`` of the field it is now (`nil`: a field removed since, nothing to store).
    private var positionsByVersion: [Int: [String: Int?]]
    /// The same for a version without a list: the current names.
    private var currentPositions: [String: Int?]

    init(_ entity: EntityDescriptor) {
        self.init(
            name: entity.name, fields: entity.fields, currentVersion: entity.currentVersion, knownFieldsByVersion: entity.knownFieldsByVersion,
            primaryKey: entity.primaryKey, versionField: entity.versionField, maxBytes: entity.maxBytes
        )
    }

    init(_ event: EventDescriptor) {
        self.init(
            name: event.name, fields: event.fields, currentVersion: event.currentVersion, knownFieldsByVersion: event.knownFieldsByVersion,
            primaryKey: nil, versionField: nil, maxBytes: event.maxBytes
        )
    }

    private init(
        name: String, fields: [FieldDescriptor], currentVersion: Int, knownFieldsByVersion: [Int: [KnownField]], primaryKey: String?,
        versionField: String?, maxBytes: Int
    ) {
        self.maxBytes = maxBytes
        self.name = name
        self.fields = fields
        self.currentVersion = currentVersion
        self.knownFieldsByVersion = knownFieldsByVersion
        self.primaryKey = primaryKey
        self.versionField = versionField
        var positions: [String: Int] = [:]
        for (position, field) in fields.enumerated() where positions[field.name] == nil { positions[field.name] = position }
        func table(_ known: [KnownField]) -> [String: Int?] {
            var table: [String: Int?] = [:]
            for field in known { table[field.wireName] = .some(field.currentName.flatMap { positions[$0] }) }
            return table
        }
        positionsByVersion = knownFieldsByVersion.mapValues(table)
        currentPositions = table(fields.map { KnownField(wireName: $0.name, currentName: $0.name) })
    }

    func field(named name: String) -> FieldDescriptor? { fields.first { $0.name == name } }

    /// How a device at `schemaVersion` names fields: wire name → position of the current field.
    func positions(atVersion schemaVersion: Int) -> [String: Int?] {
        positionsByVersion[min(schemaVersion, currentVersion)] ?? currentPositions
    }
}

/// A payload that fits its contract, in the contract's current version.
struct ValidatedPayload: Hashable, Sendable {
    /// Current field names → column values.
    var columns: [String: ColumnValue]
    /// The contract's fields, for the wire values.
    var fields: [FieldDescriptor]

    /// Current field names → normalized wire values (what the columns read back as): made when
    /// asked, since most writes need the columns alone.
    var wire: [String: JSONValue] {
        var wire: [String: JSONValue] = [:]
        wire.reserveCapacity(columns.count)
        for field in fields {
            if let column = columns[field.name] { wire[field.name] = RowCodec.wireValue(column, for: field) }
        }
        return wire
    }

    /// The wire value of one field, when the payload has it.
    func wireValue(of name: String) -> JSONValue? {
        guard let column = columns[name], let field = fields.first(where: { $0.name == name }) else { return nil }
        return RowCodec.wireValue(column, for: field)
    }
}

/// Checks a device's payload against a contract before anything is written: the field names
/// of the device's schema version (mapped to the current names), types, enum values, lengths
/// and required fields. Every problem is reported, not only the first.
///
/// Names: a device at an older version sends the names that version knew (`length_seconds`
/// for `Lesson` version 1); they are mapped to the current names with the contract's
/// ``EntityDescriptor/knownFieldsByVersion``. A field added after the device's version takes
/// its contract default (or null when optional). A field the device's version does not know
/// is refused as unknown. (A device *newer* than this server never gets here: its mutations
/// are refused with `schema_too_new` before validation, see ``PreparedMutation``.)
enum PayloadValidator {
    /// Whether a payload is a whole row (create, update, event) or only changed fields (patch).
    enum Mode: Sendable {
        case whole
        case partial
    }

    /// Validates `payload` for a device at `schemaVersion`; `rowID` is the mutation's id, which
    /// fills the primary key when the payload leaves it out and must match it otherwise.
    static func validate(
        _ payload: JSONValue?, contract: PayloadContract, schemaVersion: Int, mode: Mode, rowID: String?
    ) throws(ErrorDetail) -> ValidatedPayload {
        guard case .object(let sent)? = payload else {
            throw invalid(contract, ["payload": "the payload must be a JSON object of \(contract.name)'s fields"])
        }
        var problems: [String: String] = [:]
        // Ids and references in another spelling than NFC (``UnicodeIdentifier``).
        var unnormalized: [String: String] = [:]
        // Values over their field's byte limit.
        var tooLarge: [String: String] = [:]
        // The sent values by the position of their current field: no dictionary per payload.
        var values = [JSONValue?](repeating: nil, count: contract.fields.count)
        let positions = contract.positions(atVersion: schemaVersion)
        // In the payload's own order: each problem is keyed by its field, so the order changes nothing.
        for (key, value) in sent {
            guard let position = positions[key] else {
                problems[key] = "'\(key)' is not a field of \(contract.name) version \(schemaVersion)"
                continue
            }
            // A field the device's version knew but the contract has since removed: nothing to store.
            guard let position else { continue }
            values[position] = value
        }

        var columns: [String: ColumnValue] = [:]
        columns.reserveCapacity(contract.fields.count)
        for (position, field) in contract.fields.enumerated() {
            var value = values[position]
            if field.name == contract.primaryKey, let rowID {
                if value == nil { value = .string(rowID) }
            }
            if value == nil {
                if mode == .partial { continue }
                if field.name == contract.versionField { continue }  // stamped by the server
                if let defaultValue = field.defaultValue {
                    value = defaultValue
                } else if field.isOptional {
                    value = .null
                } else {
                    problems[field.name] = "'\(field.name)' is required"
                    continue
                }
            }
            guard let value else { continue }
            do {
                let column = try RowCodec.columnValue(value, for: field)
                columns[field.name] = column
                if case .text(let text) = column, isIdentifier(field), !UnicodeIdentifier.isNormalized(text) {
                    unnormalized[field.name] =
                        "'\(field.name)' is not in Unicode NFC; send it as \(CanonicalJSON.text(.string(UnicodeIdentifier.normalized(text))))"
                }
            } catch  where error.isTooLarge {
                tooLarge[field.name] = error.message
            } catch {
                problems[field.name] = error.message
            }
        }
        if let key = contract.primaryKey, let rowID, problems[key] == nil, let column = columns[key] {
            let normalizedID = try? normalizedRowID(rowID, contract: contract)
            if let normalizedID, column != .text(normalizedID) {
                let wire = contract.field(named: key).map { RowCodec.wireValue(column, for: $0) } ?? .null
                problems[key] = "'\(key)' in the payload (\(CanonicalJSON.text(wire))) differs from the mutation's id '\(rowID)'"
            }
        }
        if !problems.isEmpty { throw invalid(contract, problems) }
        if !tooLarge.isEmpty { throw invalid(contract, tooLarge, code: .valueTooLarge) }
        if !unnormalized.isEmpty { throw invalid(contract, unnormalized, code: .identifierNotNormalized) }
        // A patch is measured once merged with the stored row (``PushEntityApplier``).
        if mode == .whole { try requireRowSize(columns, contract: contract) }
        return ValidatedPayload(columns: columns, fields: contract.fields)
    }

    /// `row_too_large` when a row's values together take more than its contract's `max_bytes`.
    static func requireRowSize(_ columns: [String: ColumnValue], contract: PayloadContract) throws(ErrorDetail) {
        let bytes = RowSize.storedBytes(of: columns.values)
        guard bytes > contract.maxBytes else { return }
        throw ErrorDetail(
            code: .rowTooLarge,
            message: "\(contract.name): the row takes \(bytes) bytes, more than its contract's limit of \(contract.maxBytes)",
            details: .object(["bytes": .int(Int64(bytes)), "max_bytes": .int(Int64(contract.maxBytes))])
        )
    }

    /// The wire names a device at `schemaVersion` uses, mapped to current names. Unknown names
    /// land in `problems`.
    static func currentNames(
        _ sent: [String: JSONValue], contract: PayloadContract, schemaVersion: Int, problems: inout [String: String]
    ) -> [String: JSONValue] {
        let positions = contract.positions(atVersion: schemaVersion)
        var renamed: [String: JSONValue] = [:]
        for key in sent.keys.sorted() {
            guard let position = positions[key] else {
                problems[key] = "'\(key)' is not a field of \(contract.name) version \(schemaVersion)"
                continue
            }
            // A field the device's version knew but the contract has since removed: nothing to store.
            guard let position else { continue }
            renamed[contract.fields[position].name] = sent[key]
        }
        return renamed
    }

    /// A mutation id as its primary-key column holds it (UUIDs lowercased).
    static func normalizedRowID(_ id: String, contract: PayloadContract) throws(ErrorDetail) -> String {
        guard !id.isEmpty else { throw invalid(contract, ["id": "the mutation's id is empty"]) }
        guard UnicodeIdentifier.isNormalized(id) else {
            throw invalid(
                contract, ["id": "the mutation's id is not in Unicode NFC; send it as '\(UnicodeIdentifier.normalized(id))'"],
                code: .identifierNotNormalized)
        }
        guard let key = contract.primaryKey, let field = contract.field(named: key) else { return id }
        let value: JSONValue
        if case .int = field.kind, let number = Int64(id) { value = .int(number) } else { value = .string(id) }
        do {
            switch try RowCodec.columnValue(value, for: field) {
            case .text(let text): return text
            case .integer(let number): return String(number)
            default: return id
            }
        } catch {
            throw invalid(contract, ["id": "the mutation's id is not a valid '\(key)': \(error.message)"])
        }
    }

    /// The column values of a `field_merge` patch's base (the values before the edit), by current
    /// name. A base value that does not fit its field is left out: it cannot equal a stored value.
    static func baseColumns(_ base: [String: JSONValue], contract: PayloadContract, schemaVersion: Int) -> [String: ColumnValue] {
        var ignoredProblems: [String: String] = [:]
        let renamed = currentNames(base, contract: contract, schemaVersion: schemaVersion, problems: &ignoredProblems)
        var columns: [String: ColumnValue] = [:]
        for (name, value) in renamed {
            guard let field = contract.field(named: name) else { continue }
            if let column = try? RowCodec.columnValue(value, for: field) { columns[name] = column }
        }
        return columns
    }

    /// An `invalid_payload` refusal (or `code`) listing every problem: `details.fields` maps each
    /// field to what is wrong with it.
    static func invalid(_ contract: PayloadContract, _ problems: [String: String], code: ErrorCode = .invalidPayload) -> ErrorDetail {
        let names = problems.keys.sorted()
        let summary = names.prefix(3).map { problems[$0]! }.joined(separator: "; ")
        let more = names.count > 3 ? " (and \(names.count - 3) more)" : ""
        return ErrorDetail(
            code: code,
            message: "\(contract.name): \(summary)\(more)",
            details: .object(["fields": .object(problems.mapValues(JSONValue.string))])
        )
    }

    /// Whether a field holds an identifier: an `id`, or a reference to a row (stored as its
    /// target's primary key), compared byte for byte wherever it is looked up.
    private static func isIdentifier(_ field: FieldDescriptor) -> Bool {
        switch field.kind {
        case .id, .ref: true
        default: false
        }
    }
}

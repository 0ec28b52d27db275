import Foundation

/// Converts between a field's wire form (JSON) and its column value, following the field's
/// contract type: the one place that knows how each type is checked and stored. The device's
/// store, the server's storages and the PostgreSQL adapter all go through it, so a value is
/// accepted, refused and stored the same way everywhere.
///
/// | kind | wire | column |
/// | --- | --- | --- |
/// | `id`, `string`, `date`, enum | text | text |
/// | `uuid` | text | text, lowercased |
/// | `int` | integer (a whole number written as `3.0` too) | integer |
/// | `double` | finite number | real |
/// | `bool` | `true`/`false` | integer 0/1 |
/// | `timestamp` | ISO-8601 text | integer milliseconds |
/// | `json`, `list<T>` | any / array | text, canonical JSON |
/// | `bytes` | base64 text | blob |
/// | `file` | a ``FileReference`` object | text, canonical JSON |
/// | `ref<E>` | as `E`'s primary key | as `E`'s primary key |
package struct FieldCodec: Sendable {
    /// How strictly values are checked.
    package enum Mode: Sendable {
        /// A write (on a device, or pushed to the server): every rule of the contract (enum
        /// values, `max_length`, `max_bytes`, the length of ids, required fields). An unknown
        /// enum value is refused: the fallback is for reading, not for storing what a writer
        /// did not say.
        case write
        /// A row the server sent: an unknown enum value becomes the contract's fallback, the
        /// way the generated types decode it; lengths and sizes are the writer's business.
        case read
        /// A query filter's value: converted like a stored value, never refused for its length,
        /// size or an enum value (a filter on a value nothing has matches nothing).
        case query
    }

    /// The longest id (a field of type `id`, or a `ref` to one), in UTF-8 bytes: every device
    /// reading the row stores and indexes it.
    package static let maximumIDBytes = 256

    /// Largest magnitude a whole `double` may have to be taken as an `int` (beyond it a
    /// double no longer holds every whole number exactly).
    static let exactWholeDoubleLimit = 9.0e15

    private let primaryKeyKinds: [String: FieldKind]

    /// A codec for the contracts of `entities`: a `ref` field is stored as its target's
    /// primary key (an `id` when the target is not among them).
    package init(entities: [EntityDescriptor]) {
        primaryKeyKinds = Dictionary(
            entities.map { entity in (entity.name, entity.field(named: entity.primaryKey)?.kind ?? .id) },
            uniquingKeysWith: { first, _ in first }
        )
    }

    /// A codec for every entity of a generated registry.
    package init<Schema: ContractSchema>(_ schema: Schema.Type) {
        self.init(entities: Schema.entities)
    }

    /// The kind a field's column holds: its own, or for a `ref` its target's primary key's (as
    /// the compiler resolved it, else as the entities of this codec say).
    package func columnKind(of field: FieldDescriptor) -> FieldKind {
        if case .ref = field.kind, let key = field.referencedKey { return key }
        return columnKind(field.kind)
    }

    /// The kind a column of `kind` holds: its own, or for a `ref` its target's primary key's
    /// among the entities of this codec (an `id` when the target is not among them).
    package func columnKind(_ kind: FieldKind) -> FieldKind {
        guard case .ref(let target) = kind else { return kind }
        return primaryKeyKinds[target] ?? .id
    }

    // MARK: Wire → column

    /// The column value for a field's wire value; throws when the value does not fit the type.
    /// On a write, a value whose column is larger than the field's ``FieldDescriptor/maxBytes``
    /// is refused with a ``FieldValueError`` whose ``FieldValueError/isTooLarge`` is true.
    package func columnValue(_ value: JSONValue, for field: FieldDescriptor, mode: Mode = .write) throws(FieldValueError) -> ColumnValue {
        if case .null = value {
            guard field.isOptional else { throw FieldValueError(field: field.name, reason: "is required") }
            return .null
        }
        let column = try columnValue(value, kind: field.kind, field: field, mode: mode)
        // Measured on the column, as stored: the canonical JSON text, the decoded bytes. A
        // file's limit is its file's size, checked on the reference.
        if mode == .write, field.kind != .file, let limit = field.maxBytes, column.storedBytes > limit {
            throw FieldValueError(field: field.name, reason: "takes \(column.storedBytes) bytes, more than its limit of \(limit)", kind: .tooLarge)
        }
        return column
    }

    private func columnValue(_ value: JSONValue, kind: FieldKind, field: FieldDescriptor, mode: Mode) throws(FieldValueError) -> ColumnValue {
        func fail(_ reason: String) -> FieldValueError { FieldValueError(field: field.name, reason: reason) }
        let checksLimits = mode == .write
        switch kind {
        case .id, .string:
            guard case .string(let text) = value else { throw fail("must be text") }
            if checksLimits, let limit = field.maxLength, text.count > limit {
                throw fail("is longer than \(limit) characters")
            }
            if checksLimits, case .id = kind, text.utf8.count > Self.maximumIDBytes {
                throw fail("is longer than \(Self.maximumIDBytes) bytes, the most an id may have")
            }
            return .text(text)
        case .int:
            switch value {
            case .int(let number): return .integer(number)
            case .double(let number) where number == number.rounded() && abs(number) < Self.exactWholeDoubleLimit:
                return .integer(Int64(number))
            default: throw fail("must be a whole number")
            }
        case .double:
            switch value {
            case .int(let number): return .real(Double(number))
            case .double(let number) where number.isFinite: return .real(number)
            default: throw fail("must be a finite number")
            }
        case .bool:
            guard case .bool(let flag) = value else { throw fail("must be true or false") }
            return .integer(flag ? 1 : 0)
        case .timestamp:
            guard case .string(let text) = value, let timestamp = Timestamp(iso8601: text) else {
                throw fail("must be an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")
            }
            return .integer(timestamp.millisecondsSince1970)
        case .date:
            guard case .string(let text) = value, let date = CalendarDate(text) else { throw fail("must be a date such as 2026-01-31") }
            return .text(date.description)
        case .uuid:
            guard case .string(let text) = value, let uuid = Self.normalizedUUID(text) else { throw fail("must be a UUID") }
            return .text(uuid)
        case .json:
            return .text(CanonicalJSON.text(value))
        case .bytes:
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else { throw fail("must be base64 text") }
            if checksLimits, let limit = field.maxLength, data.count > limit {
                throw fail("is longer than \(limit) bytes")
            }
            return .blob(data)
        case .file:
            let reference: FileReference
            do {
                reference = try FileReference(json: value)
            } catch {
                throw fail(error.description)
            }
            if checksLimits, let limit = field.maxBytes, reference.byteCount > Int64(limit) {
                throw FieldValueError(
                    field: field.name, reason: "names a file of \(reference.byteCount) bytes, more than its limit of \(limit)", kind: .tooLarge)
            }
            if checksLimits, !reference.hasContentType(in: field.contentTypes) {
                throw FieldValueError(
                    field: field.name,
                    reason: "names a file of type \(reference.contentType), which it does not accept (\(field.contentTypes.joined(separator: ", ")))",
                    kind: .contentTypeNotAllowed)
            }
            return .text(reference.canonicalText)
        case .enumeration(let values, let fallback):
            // The message is built only on failure: this runs for every enum column of every row.
            guard case .string(let text) = value else { throw fail("must be one of \(values.joined(separator: ", "))") }
            if values.contains(text) || mode == .query { return .text(text) }
            if mode == .read, let fallback { return .text(fallback) }
            throw fail("must be one of \(values.joined(separator: ", "))")
        case .list(let element):
            guard case .array(let items) = value else { throw fail("must be a list") }
            if checksLimits, let limit = field.maxLength, items.count > limit {
                throw fail("has more than \(limit) items")
            }
            var normalized: [JSONValue] = []
            normalized.reserveCapacity(items.count)
            for item in items {
                guard item != .null else { throw fail("must not contain null") }
                let stored = try columnValue(item, kind: element, field: field, mode: mode)
                normalized.append(wireValue(stored, kind: element))
            }
            return .text(CanonicalJSON.text(.array(normalized)))
        case .ref:
            return try columnValue(value, kind: kind == field.kind ? columnKind(of: field) : columnKind(kind), field: field, mode: mode)
        }
    }

    // MARK: Column → wire

    /// The wire value of a field's stored column.
    package func wireValue(_ value: ColumnValue, for field: FieldDescriptor) -> JSONValue {
        // Only a `ref` needs its key's kind looked up; every other field reads as its own kind
        // without a copy of it (an enum's values travel with the kind).
        if case .ref = field.kind { return wireValue(value, kind: columnKind(of: field)) }
        return wireValue(value, kind: field.kind)
    }

    /// The wire value of a stored column of `kind`.
    package func wireValue(_ value: ColumnValue, kind: FieldKind) -> JSONValue {
        switch (kind, value) {
        case (_, .null): return .null
        case (.int, .integer(let number)): return .int(number)
        case (.int, .real(let number)):
            // A REAL in an integer column (SQLite's type affinity allows it): whole values read
            // back as the integers they are.
            if number == number.rounded(), abs(number) < Self.exactWholeDoubleLimit { return .int(Int64(number)) }
            return .double(number)
        case (.double, .real(let number)): return .double(number)
        case (.double, .integer(let number)): return .double(Double(number))
        case (.bool, .integer(let number)): return .bool(number != 0)
        case (.timestamp, .integer(let millis)): return .string(Timestamp(millisecondsSince1970: millis).iso8601)
        case (.json, .text(let text)), (.list, .text(let text)), (.file, .text(let text)): return JSONParser.parse(text) ?? .null
        case (.bytes, .blob(let data)): return .string(data.base64EncodedString())
        case (.ref, _): return wireValue(value, kind: columnKind(kind))
        case (_, .text(let text)): return .string(text)
        case (_, .integer(let number)): return .int(number)
        case (_, .real(let number)): return .double(number)
        case (_, .blob(let data)): return .string(data.base64EncodedString())
        }
    }

    /// ``wireValue(_:kind:)`` written straight into `json`, the same bytes as
    /// `json.value(wireValue(value, kind: kind))` without building the value first: what a pull
    /// page writes for every column of every row. A `json`, `list` or `file` column holds canonical JSON
    /// text (``columnValue(_:for:mode:)`` writes it so, the PostgreSQL reader canonicalizes
    /// what it reads), so it is copied as it is once it scans as one JSON value; text that does
    /// not is written `null`, as ``wireValue(_:kind:)`` reads it.
    package func writeWire(_ value: ColumnValue, kind: FieldKind, into json: inout JSONWriter) {
        switch (kind, value) {
        case (_, .null): json.null()
        case (.timestamp, .integer(let millis)): json.timestamp(millis)
        case (.json, .text(let text)), (.list, .text(let text)), (.file, .text(let text)):
            var text = text
            text.withUTF8 { bytes in
                var parser = JSONParser.Parser(bytes: bytes)
                if parser.skipValue() {
                    parser.skipWhitespace()
                    if parser.index == bytes.count {
                        json.append(bytes)
                        return
                    }
                }
                json.null()
            }
        case (.ref, _): writeWire(value, kind: columnKind(kind), into: &json)
        case (.int, .integer(let number)): json.int(number)
        case (.bool, .integer(let number)): json.bool(number != 0)
        case (.double, _), (.int, _), (.bool, _), (.bytes, _): json.value(wireValue(value, kind: kind))
        case (_, .text(let text)): json.string(text)
        default: json.value(wireValue(value, kind: kind))
        }
    }

    // MARK: Keys

    /// The text form of a primary key (ids as they are, UUIDs lowercased, integers in decimal),
    /// the same as the generated `contractPrimaryKey`.
    package func keyText(_ value: JSONValue, kind: FieldKind) -> String? {
        switch (kind, value) {
        case (.uuid, .string(let text)): return Self.normalizedUUID(text) ?? text
        case (.ref, _): return keyText(value, kind: columnKind(kind))
        case (_, .string(let text)): return text
        case (_, .int(let number)): return String(number)
        default: return nil
        }
    }

    /// A UUID's text in the stored form (lowercase, hyphenated), or `nil` when it is not a UUID.
    /// Text already in that form (what servers send) is taken as it is, without parsing it into
    /// a `UUID` and printing it again.
    package static func normalizedUUID(_ text: String) -> String? {
        var text = text
        let canonical = text.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for (index, byte) in bytes.enumerated() {
                switch index {
                case 8, 13, 18, 23: guard byte == UInt8(ascii: "-") else { return false }
                default: guard (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) else { return false }
                }
            }
            return true
        }
        if canonical { return text }
        return UUID(uuidString: text)?.uuidString.lowercased()
    }
}

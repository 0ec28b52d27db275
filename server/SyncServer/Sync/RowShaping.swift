package import ContractRuntime
import SyncProtocol

/// Turns stored rows into the wire form a device understands: the fields its schema version
/// of the contract knows, under the names that version uses, and nothing else.
///
/// A device on `Unit` version 2 receives `position` (the name before version 3) and no
/// `estimated_minutes` (added in 3); a device on the current version receives every field.
/// The field lists come from the contract registry's `EntityDescriptor.knownFieldsByVersion`,
/// which the compiler derives from the released history in `contracts.lock`.
package enum RowShaping {
    /// The version a device runs for a contract: what it sent in `schema`, or the current
    /// version when it sent nothing for that contract. A version above the current one (a
    /// newer build) gets the current shape.
    package static func schemaVersion(of name: String, current: Int, in schema: [String: Int]) -> Int {
        guard let version = schema[name] else { return current }
        return min(version, current)
    }

    /// Refuses (426 `schema_too_old`) when `schema` names a version of a contract below the
    /// contract's `oldest_supported`. Names this server does not know are ignored: a newer
    /// device may know contracts the server does not.
    ///
    /// The details name the first such contract (in name order):
    /// `{"entity": "Unit", "oldest_supported": 2, "current": 3}`.
    package static func requireSupported(_ schema: [String: Int], contracts: ContractCatalog) throws(ServiceError) {
        for name in schema.keys.sorted() {
            let version = schema[name]!
            let range: (oldest: Int, current: Int)?
            if let entity = contracts.entity(named: name) {
                range = (entity.oldestSupported, entity.currentVersion)
            } else if let event = contracts.event(named: name) {
                range = (event.oldestSupported, event.currentVersion)
            } else {
                range = nil
            }
            guard let range, version < range.oldest else { continue }
            throw ServiceError(
                status: 426, .schemaTooOld,
                "\(name) version \(version) is no longer supported (oldest supported \(range.oldest), current \(range.current)); update the app",
                details: .object([
                    "entity": .string(name), "oldest_supported": .int(Int64(range.oldest)), "current": .int(Int64(range.current)),
                ])
            )
        }
    }

    /// The fields a device at `version` knows; the current version's when that version is not
    /// supported or not recorded.
    static func knownFields(_ entity: EntityDescriptor, version: Int) -> [KnownField] {
        entity.knownFields(forSchemaVersion: version) ?? entity.knownFieldsByVersion[entity.currentVersion]
            ?? entity.fields.map { KnownField(wireName: $0.name, currentName: $0.name) }
    }

    static func knownFields(_ event: EventDescriptor, version: Int) -> [KnownField] {
        event.knownFields(forSchemaVersion: version) ?? event.knownFieldsByVersion[event.currentVersion]
            ?? event.fields.map { KnownField(wireName: $0.name, currentName: $0.name) }
    }

    /// The fields a device at one version of a contract knows, each with the key it goes
    /// under; worked out once per page, not per row. A field the version knows but the contract
    /// has since removed has no column any more and is left out.
    package struct Plan: Sendable {
        let fields: [(wireName: String, field: FieldDescriptor)]
        /// What ``write(_:positions:into:)`` writes, in key order: each member's `"key":` bytes and its
        /// field's column with the kind the column is read as (a `ref` as its target's key); no
        /// column for the server's row version.
        let members: [(key: [UInt8], column: String?, kind: FieldKind)]

        init(fields: [FieldDescriptor], known: [KnownField]) {
            var byName: [String: FieldDescriptor] = [:]
            for field in fields {
                byName[field.name] = field
            }
            self.fields = known.compactMap { knownField in
                knownField.currentName.flatMap { byName[$0] }.map { (knownField.wireName, $0) }
            }
            var members: [String: (column: String?, kind: FieldKind)] = [Self.serverVersionKey: (nil, .int)]
            for (wireName, field) in self.fields {
                members[wireName] = (field.name, RowCodec.columnKind(of: field))
            }
            self.members = JSONWriter.sorted(members.keys).map { (JSONWriter.key($0), members[$0]!.column, members[$0]!.kind) }
        }

        /// The plan for schema `version` of an entity.
        package init(_ entity: EntityDescriptor, version: Int) {
            self.init(fields: entity.fields, known: RowShaping.knownFields(entity, version: version))
        }

        /// The plan for the payload of schema `version` of an event.
        package init(_ event: EventDescriptor, version: Int) {
            self.init(fields: event.fields, known: RowShaping.knownFields(event, version: version))
        }

        /// The row's fields in wire form, read from their columns (which carry the current names).
        package func shape(_ row: StoredRow) -> [String: JSONValue] {
            var wire: [String: JSONValue] = [:]
            wire.reserveCapacity(fields.count)
            for (wireName, field) in fields {
                wire[wireName] = RowCodec.wireValue(row[field.name], for: field)
            }
            // Entity rows carry the server's row version (`_version`), which a device sends back as
            // `base_version` under `version_check`. Contract fields never start with `_`.
            if let version = row.integer("_version") {
                wire[Self.serverVersionKey] = .int(version)
            }
            return wire
        }

        /// Where each of ``members``' columns sits in rows of `layout` (the server's row version
        /// for the member without a column); found once for the many rows of a page.
        func positions(in layout: StoredRow.Layout) -> [Int?] {
            members.map { member in layout.position(of: member.column ?? "_version") }
        }

        /// ``shape(_:)`` written as a JSON object, keys sorted, without building it first, for a
        /// row whose layout's ``positions(in:)`` are known.
        func write(_ row: StoredRow, positions: [Int?], into json: inout JSONWriter) {
            json.append(0x7B)
            var first = true
            for index in members.indices {
                let member = members[index]
                let stored = positions[index].map(row.value(at:)) ?? .null
                guard member.column != nil else {
                    guard case .integer(let version) = stored else { continue }
                    json.member(member.key, first: &first)
                    json.int(version)
                    continue
                }
                json.member(member.key, first: &first)
                RowCodec.writeWire(stored, kind: member.kind, into: &json)
            }
            json.append(0x7D)
        }

        /// A row sent with only the fields that changed after the device's cursor: the primary
        /// key, ``baseVersionKey`` (the version those changes apply to), the changed fields and
        /// ``serverVersionKey``, keys sorted as ``write(_:positions:into:)`` sorts them.
        func writeChanges(_ row: StoredRow, _ changes: PullPage.Changes, positions: [Int?], into json: inout JSONWriter) {
            json.append(0x7B)
            var first = true
            var baseWritten = false
            for index in members.indices {
                let member = members[index]
                if !baseWritten, !member.key.lexicographicallyPrecedes(Self.baseVersionKeyBytes) {
                    json.member(Self.baseVersionKeyBytes, first: &first)
                    json.int(changes.baseVersion)
                    baseWritten = true
                }
                let stored = positions[index].map(row.value(at:)) ?? .null
                guard let column = member.column else {
                    guard case .integer(let version) = stored else { continue }
                    json.member(member.key, first: &first)
                    json.int(version)
                    continue
                }
                guard column == changes.primaryKey || changes.fields.contains(column) else { continue }
                json.member(member.key, first: &first)
                RowCodec.writeWire(stored, kind: member.kind, into: &json)
            }
            if !baseWritten {
                json.member(Self.baseVersionKeyBytes, first: &first)
                json.int(changes.baseVersion)
            }
            json.append(0x7D)
        }

        /// The key of the server's row version in a pulled entity row.
        package static let serverVersionKey = "_server_version"
        /// The key that marks a pulled entity row carrying only the fields changed since the
        /// device's cursor, with the row's version at that cursor (see ``FieldSeqs``).
        package static let baseVersionKey = "_base_version"
        private static let baseVersionKeyBytes = JSONWriter.key(baseVersionKey)
    }

    /// An entity row in the wire form of schema `version` of its contract.
    package static func wireRow(_ row: StoredRow, entity: EntityDescriptor, version: Int) -> [String: JSONValue] {
        Plan(entity, version: version).shape(row)
    }

    /// An entity row in the wire form of its contract's current version.
    package static func currentWireRow(_ row: StoredRow, entity: EntityDescriptor) -> [String: JSONValue] {
        var wire: [String: JSONValue] = [:]
        for field in entity.fields {
            wire[field.name] = RowCodec.wireValue(row[field.name], for: field)
        }
        return wire
    }

    /// An event row as a device receives it: the envelope (`event_id`, `type`, `schema_version`,
    /// `user_id`, `device_id`, `occurred_at`, `recorded_at`, `hash`) and the `payload` shaped
    /// for schema `version`. `schema_version` says the version the payload is shaped for;
    /// `hash` stays the one the recording device computed over its own payload.
    package static func wireEvent(_ row: StoredRow, event: EventDescriptor, version: Int) -> [String: JSONValue] {
        wireEvent(row, event: event, version: version, plan: Plan(event, version: version))
    }

    static func wireEvent(_ row: StoredRow, event: EventDescriptor, version: Int, plan: Plan) -> [String: JSONValue] {
        let shapedVersion = event.knownFields(forSchemaVersion: version) == nil ? event.currentVersion : version
        func timestamp(_ column: String) -> JSONValue {
            guard let millis = row.integer(column) else { return .null }
            return .string(Timestamp(millisecondsSince1970: millis).iso8601)
        }
        func text(_ column: String) -> JSONValue { row.text(column).map(JSONValue.string) ?? .null }
        return [
            "event_id": text("event_id"),
            "type": .string(event.name),
            "schema_version": .int(Int64(shapedVersion)),
            "user_id": text("user_id"),
            "device_id": text("device_id"),
            "occurred_at": timestamp("occurred_at"),
            "recorded_at": timestamp("recorded_at"),
            "hash": text("hash"),
            "payload": .object(plan.shape(row)),
        ]
    }
}

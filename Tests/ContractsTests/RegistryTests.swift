import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// The registry lists every generated type, and its descriptors are consistent with each other.
@Suite("Contract registry", .blockingWork)
struct RegistryTests {
    @Test("The registry lists entities, events and scopes")
    func registryIsNotEmpty() {
        #expect(ContractRegistry.entities.count > 0)
        #expect(ContractRegistry.events.count > 0)
        #expect(ContractRegistry.scopes.count > 0)
        #expect(ContractRegistry.entityTypes.count == ContractRegistry.entities.count)
        #expect(ContractRegistry.eventTypes.count == ContractRegistry.events.count)
    }

    @Test("Generated entity types line up with the entity descriptors")
    func entityTypesMatchDescriptors() throws {
        try #require(ContractRegistry.entityTypes.count == ContractRegistry.entities.count)
        for (type, descriptor) in zip(ContractRegistry.entityTypes, ContractRegistry.entities) {
            #expect(type.descriptor.name == descriptor.name, "\(type) is listed at the place of \(descriptor.name)")
            #expect(type.descriptor == descriptor, "\(type).descriptor differs from ContractRegistry.entities")
            #expect(String(describing: type) == descriptor.swiftName, "\(descriptor.name): swiftName")
        }
    }

    @Test("Generated event types line up with the event descriptors")
    func eventTypesMatchDescriptors() throws {
        try #require(ContractRegistry.eventTypes.count == ContractRegistry.events.count)
        for (type, descriptor) in zip(ContractRegistry.eventTypes, ContractRegistry.events) {
            #expect(type.descriptor.name == descriptor.name, "\(type) is listed at the place of \(descriptor.name)")
            #expect(type.descriptor == descriptor, "\(type).descriptor differs from ContractRegistry.events")
            #expect(String(describing: type) == descriptor.swiftName, "\(descriptor.name): swiftName")
        }
    }

    @Test("Contract names, Swift names, tables and index names are unique")
    func namesAreUnique() {
        let names = AllContracts.names
        #expect(Set(names).count == names.count, "duplicate contract names: \(duplicates(names))")
        let swiftNames = ContractRegistry.entities.map(\.swiftName) + ContractRegistry.events.map(\.swiftName)
        #expect(Set(swiftNames).count == swiftNames.count, "duplicate Swift names: \(duplicates(swiftNames))")
        let tables = ContractRegistry.entities.map(\.table) + ContractRegistry.events.map(\.table)
        #expect(Set(tables).count == tables.count, "duplicate tables: \(duplicates(tables))")
        // SQLite index names live in one namespace per database.
        let indexes = ContractRegistry.entities.flatMap { $0.indexes.map(\.name) }
        #expect(Set(indexes).count == indexes.count, "duplicate index names: \(duplicates(indexes))")
        let scopes = ContractRegistry.scopes.map(\.name)
        #expect(Set(scopes).count == scopes.count, "duplicate scopes: \(duplicates(scopes))")
    }

    @Test("Lookups by name find every contract and nothing else")
    func lookupsByName() {
        for entity in ContractRegistry.entities {
            #expect(ContractRegistry.entity(named: entity.name) == entity)
            #expect(ContractRegistry.event(named: entity.name) == nil)
        }
        for event in ContractRegistry.events {
            #expect(ContractRegistry.event(named: event.name) == event)
            #expect(ContractRegistry.entity(named: event.name) == nil)
        }
        for scope in ContractRegistry.scopes { #expect(ContractRegistry.scope(named: scope.name) == scope) }
        #expect(ContractRegistry.entity(named: "NoSuchEntity") == nil)
        #expect(ContractRegistry.event(named: "NoSuchEvent") == nil)
        #expect(ContractRegistry.scope(named: "no_such_scope") == nil)
    }

    @Test("The sync block's storage limits reach the descriptors: Assessment's 50 rows of 10 MB, no other contract's")
    func storageLimits() {
        #expect(ContractRegistry.assessment.maxRows == 50)
        #expect(ContractRegistry.assessment.maxRowBytes == 10_000_000)
        #expect(Assessment.descriptor.maxRows == 50)
        let others = ContractRegistry.entities.filter { $0.name != "Assessment" }
        #expect(
            others.allSatisfy { $0.maxRows == nil && $0.maxRowBytes == nil },
            "\(others.filter { $0.maxRows != nil || $0.maxRowBytes != nil }.map(\.name))")
    }

    @Test("Every entity descriptor is internally consistent", arguments: AllContracts.entityNames)
    func entityDescriptorIsConsistent(_ name: String) throws {
        let entity = try #require(ContractRegistry.entity(named: name))
        #expect(entity.currentVersion >= entity.oldestSupported, "\(name): versions")
        #expect(entity.oldestSupported >= 1, "\(name): oldest supported")
        #expect(isSnakeCase(entity.table), "\(name): table \(entity.table)")
        if let retention = entity.retentionSeconds { #expect(retention > 0, "\(name): retention") }
        if let rows = entity.maxRows { #expect(rows >= 1, "\(name): max_rows") }
        if let bytes = entity.maxRowBytes { #expect(bytes >= 1, "\(name): max_row_bytes") }

        let scope = try #require(ContractRegistry.scope(named: entity.scope), "\(name): unknown scope \(entity.scope)")
        if entity.direction != .down {
            #expect(scope.access == .readWrite, "\(name) is pushed by devices but lives in read-only scope \(scope.name)")
        }
        if entity.conflict == .serverAuthoritative {
            #expect(entity.direction == .down, "\(name): devices never push a server-authoritative entity")
        }
        if entity.conflict == .versionCheck {
            #expect(entity.versionField != nil, "\(name): version_check needs a version field")
        }

        let key = try #require(entity.fields.first { $0.name == entity.primaryKey }, "\(name): no primary key field")
        #expect(key.isPrimaryKey && !key.isOptional, "\(name): primary key \(key.name)")
        #expect(entity.fields.filter(\.isPrimaryKey).map(\.name) == [entity.primaryKey], "\(name): primary keys")
        #expect(!entity.localFields.contains { $0.isPrimaryKey }, "\(name): a local field is a primary key")

        let versionFields = entity.fields.filter(\.isVersionField).map(\.name)
        if let versionField = entity.versionField {
            #expect(versionFields == [versionField], "\(name): version field")
            let field = try #require(entity.fields.first { $0.name == versionField })
            #expect(!field.isOptional, "\(name): version field \(versionField) is optional")
        } else {
            #expect(versionFields.isEmpty, "\(name): fields flagged as version field without a versionField")
        }

        #expect(entity.fields.allSatisfy { !$0.isLocal }, "\(name): a synced field is flagged local")
        #expect(entity.localFields.allSatisfy { $0.isLocal }, "\(name): a local field is not flagged local")
        let allNames = (entity.fields + entity.localFields).map(\.name)
        #expect(Set(allNames).count == allNames.count, "\(name): duplicate field names \(duplicates(allNames))")

        for field in entity.fields + entity.localFields {
            checkField(field, contract: name, currentVersion: entity.currentVersion)
        }

        for index in entity.indexes {
            #expect(!index.fields.isEmpty, "\(name): index \(index.name) has no fields")
            for field in index.fields {
                #expect(entity.field(named: field) != nil, "\(name): index \(index.name) names unknown field \(field)")
            }
        }

        for relation in entity.relations {
            let target = try #require(
                ContractRegistry.entity(named: relation.target), "\(name).\(relation.name): unknown target"
            )
            switch relation.kind {
            case .belongsTo:
                let foreignKey = try #require(
                    entity.fields.first { $0.name == relation.foreignKey },
                    "\(name).\(relation.name): foreign key \(relation.foreignKey) is not a field of \(name)"
                )
                #expect(foreignKey.kind == .ref(target.name), "\(name).\(relation.name): foreign key kind")
            case .hasMany:
                let foreignKey = try #require(
                    target.fields.first { $0.name == relation.foreignKey },
                    "\(name).\(relation.name): foreign key \(relation.foreignKey) is not a field of \(target.name)"
                )
                #expect(foreignKey.kind == .ref(name), "\(name).\(relation.name): foreign key kind")
            }
        }
    }

    @Test("Every event descriptor is internally consistent", arguments: AllContracts.eventNames)
    func eventDescriptorIsConsistent(_ name: String) throws {
        let event = try #require(ContractRegistry.event(named: name))
        #expect(event.currentVersion >= event.oldestSupported && event.oldestSupported >= 1, "\(name): versions")
        #expect(isSnakeCase(event.table), "\(name): table \(event.table)")
        #expect(event.direction != .down, "\(name): events are recorded on devices")
        let scope = try #require(ContractRegistry.scope(named: event.scope), "\(name): unknown scope \(event.scope)")
        #expect(scope.access == .readWrite, "\(name): devices cannot write to scope \(scope.name)")
        if let appliesTo = event.appliesTo {
            #expect(ContractRegistry.entity(named: appliesTo) != nil, "\(name): applies to unknown entity \(appliesTo)")
        }
        let names = event.fields.map(\.name)
        #expect(Set(names).count == names.count, "\(name): duplicate field names \(duplicates(names))")
        let envelope: Set = ["event_id", "type", "schema_version", "user_id", "device_id", "occurred_at", "recorded_at", "hash", "payload"]
        for field in event.fields {
            #expect(!envelope.contains(field.name), "\(name).\(field.name) collides with an envelope column")
            #expect(!field.isLocal && !field.isPrimaryKey && !field.isVersionField, "\(name).\(field.name): flags")
            checkField(field, contract: name, currentVersion: event.currentVersion)
        }
    }

    @Test("The registry exercises every field feature the wire tests rely on")
    func registryCoversTheFeaturesUnderTest() {
        let fields = ContractRegistry.entities.flatMap(\.fields) + ContractRegistry.events.flatMap(\.fields)
        func any(_ predicate: (FieldDescriptor) -> Bool) -> Bool { fields.contains(where: predicate) }
        #expect(any { if case .enumeration(_, .some) = $0.kind { return true } else { return false } }, "no enum with a fallback")
        #expect(any { if case .enumeration(_, .none) = $0.kind { return true } else { return false } }, "no enum without a fallback")
        #expect(any { $0.defaultValue != nil }, "no field with a default")
        #expect(any { $0.isOptional }, "no optional field")
        #expect(any { $0.since > 1 }, "no field with `since`")
        #expect(any { $0.renamedFrom != nil }, "no renamed field")
        #expect(ContractRegistry.entities.contains { $0.indexes.contains(where: \.isUnique) }, "no unique index")
        #expect(ContractRegistry.entities.contains { !$0.localFields.isEmpty }, "no local fields")
    }

    // MARK: Helpers

    private func checkField(_ field: FieldDescriptor, contract: String, currentVersion: Int) {
        let label = "\(contract).\(field.name)"
        #expect(isSnakeCase(field.name) && !field.name.hasPrefix("_"), "\(label): not a snake_case wire name")
        #expect(field.since >= 1 && field.since <= currentVersion, "\(label): since \(field.since)")
        if field.since > 1 {
            // An older device never sends it, so the field cannot be required.
            #expect(field.isOptional || field.defaultValue != nil, "\(label): added in v\(field.since) but required")
        }
        if let renamedFrom = field.renamedFrom {
            #expect(isSnakeCase(renamedFrom) && renamedFrom != field.name, "\(label): renamed from \(renamedFrom)")
            let version = field.renamedInVersion ?? 0
            #expect(version > field.since && version <= currentVersion, "\(label): renamed in v\(version)")
        } else {
            #expect(field.renamedInVersion == nil, "\(label): renamedInVersion without renamedFrom")
        }
        if let maxLength = field.maxLength {
            #expect(maxLength > 0, "\(label): max length \(maxLength)")
            switch field.kind {
            case .id, .string, .bytes, .list: break
            default: Issue.record("\(label): max_length on a \(field.kind) field")
            }
        }
        if field.isPrimaryKey {
            switch field.kind {
            case .id, .uuid, .int: break
            default: Issue.record("\(label): primary key of kind \(field.kind)")
            }
        }
        checkKind(field.kind, label: label)
        if let value = field.defaultValue {
            #expect(defaultFits(value, kind: field.kind), "\(label): default \(value) does not fit \(field.kind)")
        }
    }

    private func checkKind(_ kind: FieldKind, label: String) {
        switch kind {
        case .enumeration(let values, let fallback):
            #expect(!values.isEmpty, "\(label): enum without values")
            #expect(Set(values).count == values.count, "\(label): duplicate enum values")
            if let fallback { #expect(values.contains(fallback), "\(label): fallback \(fallback) is not a value") }
        case .ref(let target):
            #expect(ContractRegistry.entity(named: target) != nil, "\(label): ref to unknown entity \(target)")
        case .list(let element):
            switch element {
            case .list, .json: Issue.record("\(label): list<T> must hold scalars, holds \(element)")
            default: checkKind(element, label: label)
            }
        default:
            break
        }
    }

    private func defaultFits(_ value: JSONValue, kind: FieldKind) -> Bool {
        switch (kind, value) {
        case (.int, .int), (.double, .double), (.double, .int), (.bool, .bool), (.json, _): return true
        case (.id, .string), (.string, .string): return true
        case (.uuid, .string(let text)): return UUID(uuidString: text) != nil && text == text.lowercased()
        case (.timestamp, .string(let text)): return Timestamp(iso8601: text) != nil
        case (.date, .string(let text)): return CalendarDate(text) != nil
        case (.enumeration(let values, _), .string(let text)): return values.contains(text)
        case (.list(let element), .array(let items)): return items.allSatisfy { defaultFits($0, kind: element) }
        default: return false
        }
    }

    private func isSnakeCase(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, ("a"..."z").contains(first) || first == "_" else { return false }
        return text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    private func duplicates(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.filter { !seen.insert($0).inserted }
    }
}

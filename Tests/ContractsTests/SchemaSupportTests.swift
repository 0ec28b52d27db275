import ContractRuntime
import Contracts
import OutpostTestSupport
import Testing

/// The generated run-time schema-version checks: which versions a contract still syncs with, and
/// what a device at each of them knows.
@Suite("Schema versions at run time", .blockingWork)
struct SchemaSupportTests {
    /// An entity or event descriptor, seen through what both have in common.
    struct Versioned: Sendable, CustomStringConvertible {
        var name: String
        var currentVersion: Int
        var oldestSupported: Int
        var fields: [FieldDescriptor]
        var knownFieldsByVersion: [Int: [KnownField]]
        var support: @Sendable (Int) -> SchemaSupport
        var knownFields: @Sendable (Int) -> [KnownField]?

        var description: String { name }

        static let all: [Versioned] =
            ContractRegistry.entities.map { entity in
                Versioned(
                    name: entity.name, currentVersion: entity.currentVersion, oldestSupported: entity.oldestSupported,
                    fields: entity.fields, knownFieldsByVersion: entity.knownFieldsByVersion,
                    support: { entity.support(forSchemaVersion: $0) }, knownFields: { entity.knownFields(forSchemaVersion: $0) }
                )
            }
            + ContractRegistry.events.map { event in
                Versioned(
                    name: event.name, currentVersion: event.currentVersion, oldestSupported: event.oldestSupported,
                    fields: event.fields, knownFieldsByVersion: event.knownFieldsByVersion,
                    support: { event.support(forSchemaVersion: $0) }, knownFields: { event.knownFields(forSchemaVersion: $0) }
                )
            }

        static func named(_ name: String) throws -> Versioned {
            guard let found = all.first(where: { $0.name == name }) else { throw SampleError("no contract \(name)") }
            return found
        }

        /// The versions to probe: well below the oldest supported to well above the current one.
        var probedVersions: ClosedRange<Int> { min(0, oldestSupported - 2)...(currentVersion + 2) }
        var supportedVersions: ClosedRange<Int> { oldestSupported...currentVersion }

        func knownFields(at version: Int) throws -> [KnownField] {
            guard let fields = knownFields(version) else { throw SampleError("\(name): no known fields at v\(version)") }
            return fields
        }
    }

    @Test("Below oldest_supported is too old, above the current version too new, between supported", arguments: AllContracts.names)
    func supportByVersion(_ name: String) throws {
        let contract = try Versioned.named(name)
        #expect(contract.oldestSupported >= 1 && contract.oldestSupported <= contract.currentVersion, "\(name): versions")
        for version in contract.probedVersions {
            let expected: SchemaSupport =
                version < contract.oldestSupported ? .tooOld : version > contract.currentVersion ? .tooNew : .supported
            #expect(contract.support(version) == expected, "\(name) v\(version): \(contract.support(version)), expected \(expected)")
        }
        #expect(contract.support(Int.min) == .tooOld && contract.support(Int.max) == .tooNew, "\(name): extremes")
        #expect(contract.support(contract.currentVersion) == .supported && contract.support(contract.oldestSupported) == .supported)
    }

    @Test("Known fields exist for exactly the supported versions", arguments: AllContracts.names)
    func knownFieldsOnlyWhenSupported(_ name: String) throws {
        let contract = try Versioned.named(name)
        for version in contract.probedVersions {
            let known = contract.knownFields(version)
            if contract.supportedVersions.contains(version) {
                #expect(known != nil && known?.isEmpty == false, "\(name) v\(version): supported but no known fields")
            } else {
                #expect(known == nil, "\(name) v\(version): \(contract.support(version)) but has known fields")
            }
        }
        #expect(
            Set(contract.knownFieldsByVersion.keys) == Set(contract.supportedVersions),
            "\(name): known fields for \(contract.knownFieldsByVersion.keys.sorted()), supported \(Array(contract.supportedVersions))"
        )
    }

    @Test("Known fields agree with the descriptor's fields at every supported version", arguments: AllContracts.names)
    func knownFieldsMatchTheDescriptor(_ name: String) throws {
        let contract = try Versioned.named(name)
        let fieldNames = Set(contract.fields.map(\.name))
        for version in contract.supportedVersions {
            let label = "\(name) v\(version)"
            let known = try contract.knownFields(at: version)
            let wireNames = known.map(\.wireName)
            #expect(Set(wireNames).count == wireNames.count, "\(label): a wire name twice in \(wireNames)")
            let currentNames = known.compactMap(\.currentName)
            #expect(Set(currentNames).count == currentNames.count, "\(label): two wire names map to one field: \(currentNames)")
            for field in known {
                if let currentName = field.currentName {
                    #expect(fieldNames.contains(currentName), "\(label): \(field.wireName) maps to \(currentName), which is not a field")
                }
            }
            // Each current field the device knows, under the name it knows it by.
            for field in contract.fields {
                let expected = field.wireName(forSchemaVersion: version).map { KnownField(wireName: $0, currentName: field.name) }
                let actual = known.first { $0.currentName == field.name }
                #expect(
                    actual == expected, "\(label).\(field.name): known as \(String(describing: actual)), expected \(String(describing: expected))")
            }
        }
    }

    @Test("At the current version every field is known under its own name", arguments: AllContracts.names)
    func currentVersionKnowsEveryFieldAsItself(_ name: String) throws {
        let contract = try Versioned.named(name)
        let known = try contract.knownFields(at: contract.currentVersion)
        #expect(known.allSatisfy { $0.currentName == $0.wireName }, "\(name): \(known.filter { $0.currentName != $0.wireName })")
        #expect(known.map(\.wireName) == contract.fields.map(\.name), "\(name): \(known.map(\.wireName)) vs \(contract.fields.map(\.name))")
    }

    @Test("Unit: a v2 device knows position (now sort_index) and not estimated_minutes; v3 knows both new names")
    func unitKnownFields() throws {
        let unit = ContractRegistry.unit
        #expect(unit.currentVersion == 3 && unit.oldestSupported == 2)
        #expect(unit.support(forSchemaVersion: 1) == .tooOld)
        #expect(unit.support(forSchemaVersion: 2) == .supported)
        #expect(unit.support(forSchemaVersion: 3) == .supported)
        #expect(unit.support(forSchemaVersion: 4) == .tooNew)
        #expect(unit.knownFields(forSchemaVersion: 1) == nil)
        #expect(unit.knownFields(forSchemaVersion: 4) == nil)

        let v2 = try #require(unit.knownFields(forSchemaVersion: 2))
        let v2Names = v2.map(\.wireName)
        #expect(v2.contains(KnownField(wireName: "position", currentName: "sort_index")), "v2: \(v2)")
        #expect(!v2Names.contains("sort_index"), "v2 does not know the new name: \(v2Names)")
        #expect(!v2Names.contains("estimated_minutes"), "v2 does not know estimated_minutes: \(v2Names)")
        #expect(v2Names.contains("description"), "description was added in v2: \(v2Names)")
        for local in unit.localFields {
            #expect(!v2Names.contains(local.name), "v2: local field \(local.name) is never on the wire")
        }

        let v3 = try #require(unit.knownFields(forSchemaVersion: 3))
        let v3Names = v3.map(\.wireName)
        #expect(v3.contains(KnownField(wireName: "sort_index", currentName: "sort_index")), "v3: \(v3)")
        #expect(v3.contains(KnownField(wireName: "estimated_minutes", currentName: "estimated_minutes")), "v3: \(v3)")
        #expect(!v3Names.contains("position"), "v3: \(v3Names)")
    }

    @Test("Lesson and the v2 events: v1 devices use the old names and lack the added fields")
    func olderVersionsOfTheOtherContracts() throws {
        let lessonV1 = try #require(ContractRegistry.lesson.knownFields(forSchemaVersion: 1))
        #expect(lessonV1.contains(KnownField(wireName: "length_seconds", currentName: "duration_seconds")), "\(lessonV1)")
        #expect(!lessonV1.map(\.wireName).contains("duration_seconds"))

        for event in [ContractRegistry.batterySwapCompleted, ContractRegistry.lessonProgressed] {
            let added = event.fields.filter { $0.since == 2 }.map(\.name)
            try #require(!added.isEmpty, "\(event.name): no field added in v2")
            let v1 = try #require(event.knownFields(forSchemaVersion: 1)).map(\.wireName)
            let v2 = try #require(event.knownFields(forSchemaVersion: 2)).map(\.wireName)
            #expect(Set(added).isDisjoint(with: v1), "\(event.name) v1 knows \(added)")
            #expect(Set(added).isSubset(of: v2), "\(event.name) v2 lacks \(added)")
            #expect(event.support(forSchemaVersion: 3) == .tooNew && event.support(forSchemaVersion: 0) == .tooOld)
        }
    }
}

import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// Every generated DTO, driven only by its descriptor: JSON built from the fields decodes into
/// the type and encodes back to the same JSON, with the descriptor's field names as wire keys.
@Suite("Wire round trips of every DTO", .blockingWork)
struct WireRoundTripTests {
    @Test("Every registry contract has a generated type the round trips can reach")
    func everyContractIsCovered() throws {
        #expect(!AllContracts.names.isEmpty)
        var reached: [String] = []
        for name in AllContracts.names {
            let codec = try WireCodec.named(name)
            #expect(codec.name == name, "the type generated for \(name) describes \(codec.name)")
            reached.append(codec.name)
        }
        #expect(reached == AllContracts.names)
    }

    @Test("Every field present: decode, encode, same JSON", arguments: AllContracts.names)
    func everyFieldPresent(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let input = try WireSamples.fullObject(codec.fields)
        let output = try reencode(codec, input)

        #expect(
            Set(output.keys) == Set(codec.fields.map(\.name)),
            "\(codec.typeName): wire keys \(output.keys.sorted()) are not the descriptor fields \(codec.fields.map(\.name))"
        )
        let expected = try CanonicalJSON.text(input)
        let actual = try CanonicalJSON.text(output)
        #expect(actual == expected, "\(codec.typeName) changed on a round trip")
    }

    @Test("Only required fields: defaults fill in, optionals stay absent", arguments: AllContracts.names)
    func onlyRequiredFields(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let input = try WireSamples.requiredObject(codec.fields)
        let output = withoutNulls(try reencode(codec, input))

        let expectedKeys = Set(codec.fields.filter { !$0.isOptional }.map(\.name))
        #expect(Set(output.keys) == expectedKeys, "\(codec.typeName): keys after decoding only the required fields")
        for field in codec.fields {
            let label = "\(codec.typeName).\(field.name)"
            if let defaultValue = field.defaultValue {
                let value = try #require(output[field.name], "\(label): default not written")
                #expect(
                    try CanonicalJSON.text(value) == CanonicalJSON.text(defaultValue),
                    "\(label): a missing key must decode to the contract default \(defaultValue)"
                )
            } else if field.isOptional {
                #expect(output[field.name] == nil, "\(label): absent optional came back")
            } else {
                let value = try #require(output[field.name], "\(label): required value lost")
                #expect(
                    try CanonicalJSON.text([field.name: value])
                        == CanonicalJSON.text([field.name: input[field.name] as Any]),
                    "\(label): changed on a round trip"
                )
            }
        }
    }

    @Test("Each optional field may be absent or null", arguments: AllContracts.names)
    func optionalFieldsMayBeAbsentOrNull(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let full = try WireSamples.fullObject(codec.fields)
        for field in codec.fields where field.isOptional {
            let label = "\(codec.typeName).\(field.name)"
            var absent = full
            absent[field.name] = nil
            var null = full
            null[field.name] = NSNull()
            for (variant, input) in [("absent", absent), ("null", null)] {
                do {
                    let output = withoutNulls(try reencode(codec, input))
                    #expect(output[field.name] == nil, "\(label) \(variant): came back as \(output[field.name] ?? "")")
                    #expect(output.count == codec.fields.count - 1, "\(label) \(variant): other fields lost")
                } catch {
                    Issue.record("\(label) \(variant) must decode: \(error)")
                }
            }
        }
    }

    @Test("A missing or null required field without a default is rejected", arguments: AllContracts.names)
    func missingRequiredFieldIsRejected(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let full = try WireSamples.fullObject(codec.fields)
        #expect(throws: Never.self, "\(codec.typeName): the full sample must decode") { try reencode(codec, full) }
        for field in codec.fields where WireSamples.isRequired(field) {
            var missing = full
            missing[field.name] = nil
            #expect(throws: (any Error).self, "\(codec.typeName).\(field.name) missing must fail to decode") {
                try reencode(codec, missing)
            }
            // JSON null is a legitimate value of a `json` field.
            if case .json = field.kind { continue }
            var null = full
            null[field.name] = NSNull()
            #expect(throws: (any Error).self, "\(codec.typeName).\(field.name) null must fail to decode") {
                try reencode(codec, null)
            }
        }
    }

    @Test("A value of the wrong type or format is rejected", arguments: AllContracts.names)
    func wronglyTypedValuesAreRejected(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let full = try WireSamples.fullObject(codec.fields)
        for field in codec.fields {
            for invalid in WireSamples.invalidValues(for: field.kind) {
                var input = full
                input[field.name] = invalid
                #expect(throws: (any Error).self, "\(codec.typeName).\(field.name) accepted \(invalid)") {
                    try reencode(codec, input)
                }
            }
        }
    }

    @Test("An unknown enum value decodes to the fallback, or fails without one", arguments: AllContracts.names)
    func unknownEnumValues(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let full = try WireSamples.fullObject(codec.fields)
        for field in codec.fields {
            guard case .enumeration(let values, let fallback) = field.kind else { continue }
            let label = "\(codec.typeName).\(field.name)"
            var input = full
            input[field.name] = WireSamples.unknownEnumValue
            if let fallback {
                let output = try reencode(codec, input)
                #expect(output[field.name] as? String == fallback, "\(label): unknown value must decode as \(fallback)")
            } else {
                #expect(throws: (any Error).self, "\(label) has no fallback and must reject an unknown value") {
                    try reencode(codec, input)
                }
            }
            // Every declared value survives as itself (no fallback swallowing a known value).
            for value in values {
                input[field.name] = value
                let output = try reencode(codec, input)
                #expect(output[field.name] as? String == value, "\(label): \(value) did not round-trip")
            }
        }
    }

    @Test("Unknown keys from a newer schema are ignored", arguments: AllContracts.names)
    func unknownKeysAreIgnored(_ name: String) throws {
        let codec = try WireCodec.named(name)
        var input = try WireSamples.fullObject(codec.fields)
        let expected = try CanonicalJSON.text(input)
        input["zz_field_from_a_newer_schema"] = ["anything": 1]
        let output = try reencode(codec, input)
        #expect(output["zz_field_from_a_newer_schema"] == nil, "\(codec.typeName) kept an unknown key")
        #expect(try CanonicalJSON.text(output) == expected)
    }

    /// The wire form of a UUID is lowercase (the compiler lowercases uuid defaults and
    /// `contractPrimaryKey`), although Foundation's `UUID.uuidString` is uppercase.
    @Test("UUID fields are written lowercase, whatever case they arrive in")
    func uuidFieldsAreLowercase() throws {
        let names = AllContracts.names.filter { name in
            AllContracts.wireFields(of: name)?.contains { WireSamples.holdsUUID($0.kind) } ?? false
        }
        try #require(!names.isEmpty, "no contract has a uuid field; this test would prove nothing")
        for name in names {
            let codec = try WireCodec.named(name)
            var input = try WireSamples.fullObject(codec.fields)
            for field in codec.fields where WireSamples.holdsUUID(field.kind) {
                if let text = input[field.name] as? String {
                    input[field.name] = text.uppercased()
                } else if let list = input[field.name] as? [Any] {
                    input[field.name] = list.map { item -> Any in (item as? String)?.uppercased() ?? item }
                }
            }
            let output = try reencode(codec, input)
            for field in codec.fields where WireSamples.holdsUUID(field.kind) {
                let expected = try CanonicalJSON.text([field.name: try WireSamples.value(for: field)])
                #expect(
                    try CanonicalJSON.text([field.name: output[field.name] as Any]) == expected,
                    "\(codec.typeName).\(field.name) is not lowercase on the wire"
                )
            }
        }
    }

    // MARK: Local state

    @Test("Client-only local state decodes defaults and uses the local field names")
    func localStateUsesLocalFieldNames() throws {
        let covered = ["Assessment", "Incident", "Unit"]
        let withLocalFields = ContractRegistry.entities.filter { !$0.localFields.isEmpty }.map(\.name).sorted()
        #expect(withLocalFields == covered, "add the LocalState of every entity with local fields to this test")
        try checkLocalState(Assessment.LocalState.self, entity: "Assessment")
        try checkLocalState(Incident.LocalState.self, entity: "Incident")
        try checkLocalState(Unit.LocalState.self, entity: "Unit")
    }

    private func checkLocalState<T: Codable>(_ type: T.Type, entity name: String) throws {
        let entity = try #require(ContractRegistry.entity(named: name))
        let fields = entity.localFields
        let full = try WireSamples.fullObject(fields)
        let output = try CanonicalJSON.object(try roundTrip(T.self, json: try CanonicalJSON.data(full)))
        #expect(try CanonicalJSON.text(output) == CanonicalJSON.text(full), "\(name).LocalState round trip")
        let empty = withoutNulls(try CanonicalJSON.object(try roundTrip(T.self, json: Data("{}".utf8))))
        for field in fields {
            if let defaultValue = field.defaultValue {
                let value = try #require(empty[field.name], "\(name).LocalState.\(field.name): no default")
                #expect(try CanonicalJSON.text(value) == CanonicalJSON.text(defaultValue), "\(name).\(field.name) default")
            } else {
                #expect(empty[field.name] == nil, "\(name).LocalState.\(field.name) appeared from nothing")
            }
        }
        // Local fields never leak into the wire form of the entity itself.
        let codec = try WireCodec.named(name)
        let wire = try reencode(codec, try WireSamples.fullObject(codec.fields))
        for field in fields { #expect(wire[field.name] == nil, "\(name): local field \(field.name) is on the wire") }
    }

    // MARK: Helpers

    private func reencode(_ codec: WireCodec, _ object: [String: Any]) throws -> [String: Any] {
        try CanonicalJSON.object(try codec.reencode(try CanonicalJSON.data(object)))
    }

    private func withoutNulls(_ object: [String: Any]) -> [String: Any] { object.filter { !($0.value is NSNull) } }
}

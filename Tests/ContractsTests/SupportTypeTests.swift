import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

@Suite("CalendarDate", .blockingWork)
struct CalendarDateTests {
    @Test(
        "Accepts real days, leap days included",
        arguments: [
            "2026-01-31", "2024-02-29", "2000-02-29", "1970-01-01", "1969-12-31", "0001-01-01", "9999-12-31", "2026-04-30",
        ])
    func acceptsValidDays(_ text: String) throws {
        let date = try #require(CalendarDate(text), "\(text) must parse")
        #expect(date.description == text)
    }

    @Test(
        "Rejects impossible days and other formats",
        arguments: [
            "", "2026-02-30", "2025-02-29", "1900-02-29", "2100-02-29", "2026-04-31", "2026-13-01", "2026-00-01",
            "2026-01-00", "2026-01-32", "2026-1-01", "2026-01-1", "26-01-01", "02026-01-01", "2026/01/31", "2026-01-31T00:00:00Z",
            "2026-01-31 ", " 2026-01-31", "2026--01-31", "abcd-01-01", "2026-ab-01", "2026-01",
        ])
    func rejectsInvalidText(_ text: String) {
        #expect(CalendarDate(text) == nil, "\(text) must be rejected")
    }

    @Test("Rejects signs inside the digits")
    func rejectsSigns() {
        let invalid = ["+026-01-31", "2026-+1-31", "2026-01-+5", "2026-0１-31"]
        let accepted = invalid.filter { CalendarDate($0) != nil }
        #expect(accepted.isEmpty, "accepted: \(accepted)")
    }

    @Test("Days since 1970 match known values and invert exactly")
    func daysSince1970() {
        #expect(CalendarDate(year: 1970, month: 1, day: 1).daysSince1970 == 0)
        #expect(CalendarDate(year: 1969, month: 12, day: 31).daysSince1970 == -1)
        #expect(CalendarDate(year: 2000, month: 3, day: 1).daysSince1970 == 11_017)
        #expect(CalendarDate(year: 1, month: 1, day: 1).daysSince1970 == -719_162)
        #expect(CalendarDate(year: 9999, month: 12, day: 31).daysSince1970 == 2_932_896)
        #expect(CalendarDate(daysSince1970: 11_016) == CalendarDate(year: 2000, month: 2, day: 29))
        var day = -719_162
        var previous: CalendarDate?
        while day <= 2_932_896 {
            let date = CalendarDate(daysSince1970: day)
            #expect(date.daysSince1970 == day, "\(day) → \(date)")
            #expect(CalendarDate(date.description) == date, "\(date) does not re-parse")
            if let previous { #expect(previous < date) }
            previous = date
            day += 997
        }
    }

    @Test("Consecutive days around leap years step by one")
    func consecutiveDays() {
        for year in [1900, 2000, 2023, 2024] {
            let start = CalendarDate(year: year, month: 2, day: 27).daysSince1970
            let days = (0..<4).map { CalendarDate(daysSince1970: start + $0).description }
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            let expected =
                leap
                ? ["\(year)-02-27", "\(year)-02-28", "\(year)-02-29", "\(year)-03-01"]
                : ["\(year)-02-27", "\(year)-02-28", "\(year)-03-01", "\(year)-03-02"]
            #expect(days == expected)
        }
    }

    @Test("Pads the year and orders by calendar")
    func descriptionAndOrder() {
        #expect(CalendarDate(year: 5, month: 1, day: 2).description == "0005-01-02")
        #expect(CalendarDate(year: 2026, month: 1, day: 31) < CalendarDate(year: 2026, month: 2, day: 1))
        #expect(CalendarDate(year: 2025, month: 12, day: 31) < CalendarDate(year: 2026, month: 1, day: 1))
    }

    @Test("Codable: YYYY-MM-DD on the wire; impossible days fail to decode")
    func codable() throws {
        let date = CalendarDate(year: 2026, month: 1, day: 31)
        let data = try JSONEncoder().encode([date])
        #expect(String(decoding: data, as: UTF8.self) == #"["2026-01-31"]"#)
        #expect(try JSONDecoder().decode([CalendarDate].self, from: data) == [date])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([CalendarDate].self, from: Data(#"["2026-02-30"]"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([CalendarDate].self, from: Data("[20260131]".utf8)) }
    }
}

@Suite("JSONValue", .blockingWork)
struct JSONValueTests {
    static let values: [JSONValue] = [
        .null, .bool(true), .bool(false), .int(0), .int(-42), .int(Int64.max), .int(Int64.min), .double(2.5),
        .double(-0.125), .double(1.0e-7), .double(6.02e23), .string(""), .string("héllo \"quoted\" / \\ \n ✓"),
        .array([]), .object([:]),
        .array([.int(1), .string("a"), .null, .bool(false), .double(0.5)]),
        .object(["a": .null, "b": .object(["c": .array([.array([]), .object(["d": .int(4)])])]), "e": .bool(true)]),
    ]

    @Test("Round-trips through JSON", arguments: values.indices)
    func roundTrip(_ index: Int) throws {
        let value = Self.values[index]
        // Wrapped in an array so scalars are valid top-level JSON for every decoder.
        let data = try JSONEncoder().encode([value])
        #expect(try JSONDecoder().decode([JSONValue].self, from: data) == [value], "\(value) via \(String(decoding: data, as: UTF8.self))")
    }

    @Test("Decodes each JSON type to the matching case")
    func decodesTypes() throws {
        func decode(_ text: String) throws -> JSONValue { try JSONDecoder().decode([JSONValue].self, from: Data("[\(text)]".utf8))[0] }
        #expect(try decode("null") == .null)
        #expect(try decode("true") == .bool(true))
        #expect(try decode("false") == .bool(false))
        #expect(try decode("1") == .int(1))
        #expect(try decode("-9223372036854775808") == .int(Int64.min))
        #expect(try decode("1.5") == .double(1.5))
        #expect(try decode("1e3") == .int(1000) || decode("1e3") == .double(1000))
        #expect(try decode("18446744073709551616") == .double(18_446_744_073_709_551_616))
        #expect(try decode("\"true\"") == .string("true"))
        #expect(try decode("\"1\"") == .string("1"))
        #expect(try decode("[]") == .array([]))
        #expect(try decode("{}") == .object([:]))
        #expect(try decode(#"{"k":[1,{"n":null}]}"#) == .object(["k": .array([.int(1), .object(["n": .null])])]))
    }

    @Test("Encodes to the plain JSON document")
    func encodesPlainJSON() throws {
        let value = JSONValue.object(["b": .array([.int(1), .double(2.5), .bool(true), .null]), "a": .string("x")])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(String(decoding: try encoder.encode(value), as: UTF8.self) == #"{"a":"x","b":[1,2.5,true,null]}"#)
    }
}

@Suite("Descriptors", .blockingWork)
struct DescriptorTests {
    @Test("Every contract's schema constants equal the registry")
    func schemaConstantsMatchTheRegistry() throws {
        let constants: [(name: String, current: Int, oldest: Int)] = [
            ("AnswerRecorded", CURRENT_ANSWER_RECORDED_SCHEMA, OLDEST_SUPPORTED_ANSWER_RECORDED_SCHEMA),
            ("Assessment", CURRENT_ASSESSMENT_SCHEMA, OLDEST_SUPPORTED_ASSESSMENT_SCHEMA),
            ("AssessmentResponse", CURRENT_ASSESSMENT_RESPONSE_SCHEMA, OLDEST_SUPPORTED_ASSESSMENT_RESPONSE_SCHEMA),
            ("Asset", CURRENT_ASSET_SCHEMA, OLDEST_SUPPORTED_ASSET_SCHEMA),
            ("Attempt", CURRENT_ATTEMPT_SCHEMA, OLDEST_SUPPORTED_ATTEMPT_SCHEMA),
            ("AttemptSubmitted", CURRENT_ATTEMPT_SUBMITTED_SCHEMA, OLDEST_SUPPORTED_ATTEMPT_SUBMITTED_SCHEMA),
            ("BatterySwapCompleted", CURRENT_BATTERY_SWAP_COMPLETED_SCHEMA, OLDEST_SUPPORTED_BATTERY_SWAP_COMPLETED_SCHEMA),
            ("CompletionRecord", CURRENT_COMPLETION_RECORD_SCHEMA, OLDEST_SUPPORTED_COMPLETION_RECORD_SCHEMA),
            ("Incident", CURRENT_INCIDENT_SCHEMA, OLDEST_SUPPORTED_INCIDENT_SCHEMA),
            ("IssueLogged", CURRENT_ISSUE_LOGGED_SCHEMA, OLDEST_SUPPORTED_ISSUE_LOGGED_SCHEMA),
            ("Lesson", CURRENT_LESSON_SCHEMA, OLDEST_SUPPORTED_LESSON_SCHEMA),
            ("LessonProgressed", CURRENT_LESSON_PROGRESSED_SCHEMA, OLDEST_SUPPORTED_LESSON_PROGRESSED_SCHEMA),
            ("ServiceAsset", CURRENT_SERVICE_ASSET_SCHEMA, OLDEST_SUPPORTED_SERVICE_ASSET_SCHEMA),
            ("Statement", CURRENT_STATEMENT_SCHEMA, OLDEST_SUPPORTED_STATEMENT_SCHEMA),
            ("Task", CURRENT_TASK_SCHEMA, OLDEST_SUPPORTED_TASK_SCHEMA),
            ("TaskStarted", CURRENT_TASK_STARTED_SCHEMA, OLDEST_SUPPORTED_TASK_STARTED_SCHEMA),
            ("TaskStatusChanged", CURRENT_TASK_STATUS_CHANGED_SCHEMA, OLDEST_SUPPORTED_TASK_STATUS_CHANGED_SCHEMA),
            ("Unit", CURRENT_UNIT_SCHEMA, OLDEST_SUPPORTED_UNIT_SCHEMA),
        ]
        // The sample's contracts, named here so a constant that went missing fails to compile; a
        // contract added since is covered by the compiler's own tests of SchemaVersions.swift.
        #expect(Set(constants.map(\.name)).isSubset(of: AllContracts.names))
        for constant in constants {
            if let entity = ContractRegistry.entity(named: constant.name) {
                #expect(constant.current == entity.currentVersion, "CURRENT_…_SCHEMA of \(constant.name)")
                #expect(constant.oldest == entity.oldestSupported, "OLDEST_SUPPORTED_…_SCHEMA of \(constant.name)")
            } else {
                let event = try #require(ContractRegistry.event(named: constant.name), "\(constant.name) is not in the registry")
                #expect(constant.current == event.currentVersion, "CURRENT_…_SCHEMA of \(constant.name)")
                #expect(constant.oldest == event.oldestSupported, "OLDEST_SUPPORTED_…_SCHEMA of \(constant.name)")
            }
        }
        let unit = try #require(ContractRegistry.entity(named: "Unit"))
        #expect(CURRENT_UNIT_SCHEMA == unit.currentVersion)
        #expect(OLDEST_SUPPORTED_UNIT_SCHEMA == unit.oldestSupported)
        #expect(OLDEST_SUPPORTED_UNIT_SCHEMA <= CURRENT_UNIT_SCHEMA)
    }

    @Test("Scope keys fill their placeholders")
    func scopeKeys() throws {
        let user = try #require(ContractRegistry.scope(named: "user"))
        #expect(user.key(["user_id": "u-42"]) == user.keyTemplate.replacingOccurrences(of: "{user_id}", with: "u-42"))
        #expect(user.key([:]) == nil, "a missing placeholder must give nil")
        #expect(user.key(["team_id": "t-1"]) == nil)
        #expect(user.key(["user_id": "u-42", "unused": "x"]) == user.key(["user_id": "u-42"]))

        let custom = ScopeDescriptor(name: "pair", keyTemplate: "ops:{team_id}:route:{route_id}", access: .readWrite)
        #expect(custom.key(["team_id": "t1", "route_id": "r9"]) == "ops:t1:route:r9")
        #expect(custom.key(["team_id": "t1"]) == nil)
        #expect(ScopeDescriptor(name: "fixed", keyTemplate: "content:global", access: .read).key([:]) == "content:global")
        #expect(
            ScopeDescriptor(name: "open", keyTemplate: "a:{user_id", access: .read).key(["user_id": "u"]) == nil,
            "an unclosed placeholder is malformed")
    }

    @Test("Every registry scope resolves once its placeholders are given", arguments: ContractRegistry.scopes.map(\.name))
    func registryScopesResolve(_ name: String) throws {
        let scope = try #require(ContractRegistry.scope(named: name))
        let placeholders = Self.placeholders(in: scope.keyTemplate)
        var values: [String: String] = [:]
        for placeholder in placeholders { values[placeholder] = "v-\(placeholder)" }
        let key = try #require(scope.key(values), "\(name): \(scope.keyTemplate) did not resolve")
        var expected = scope.keyTemplate
        for placeholder in placeholders { expected = expected.replacingOccurrences(of: "{\(placeholder)}", with: "v-\(placeholder)") }
        #expect(key == expected)
        #expect(!key.contains("{") && !key.contains("}"))
        if !placeholders.isEmpty { #expect(scope.key([:]) == nil, "\(name): resolved without its placeholders") }
    }

    @Test("A field added in a later version has no wire name for older devices")
    func wireNameOfFieldsWithSince() throws {
        let found = Self.allFields.filter { $0.field.since > 1 }
        try #require(!found.isEmpty, "no field with `since` in the registry")
        for (contract, field, current) in found {
            let label = "\(contract).\(field.name) (since \(field.since))"
            #expect(field.wireName(forSchemaVersion: field.since - 1) == nil, "\(label): older device")
            #expect(field.wireName(forSchemaVersion: 1) == nil, "\(label): version 1")
            #expect(field.wireName(forSchemaVersion: field.since) != nil, "\(label): its own version")
            #expect(field.wireName(forSchemaVersion: current) == field.name, "\(label): current version")
        }
    }

    @Test("A renamed field keeps its old wire name for devices before the rename")
    func wireNameOfRenamedFields() throws {
        let found = Self.allFields.filter { $0.field.renamedFrom != nil }
        try #require(!found.isEmpty, "no renamed field in the registry")
        for (contract, field, current) in found {
            let oldName = try #require(field.renamedFrom)
            let renamedIn = try #require(field.renamedInVersion, "\(contract).\(field.name): renamed without a version")
            let label = "\(contract).\(field.name) (was \(oldName) until v\(renamedIn - 1))"
            for version in field.since..<renamedIn {
                #expect(field.wireName(forSchemaVersion: version) == oldName, "\(label): v\(version)")
            }
            for version in renamedIn...current {
                #expect(field.wireName(forSchemaVersion: version) == field.name, "\(label): v\(version)")
            }
        }
    }

    @Test("A plain field has its name at every supported version, and none before version 1")
    func wireNameOfPlainFields() {
        for (contract, field, current) in Self.allFields where field.since == 1 && field.renamedFrom == nil {
            #expect(field.wireName(forSchemaVersion: 0) == nil, "\(contract).\(field.name): version 0")
            for version in 1...current {
                #expect(field.wireName(forSchemaVersion: version) == field.name, "\(contract).\(field.name): v\(version)")
            }
        }
    }

    @Test("field(named:) finds synced and local fields")
    func fieldLookup() throws {
        for entity in ContractRegistry.entities {
            for field in entity.fields + entity.localFields { #expect(entity.field(named: field.name) == field) }
            #expect(entity.field(named: "no_such_field") == nil)
        }
        for event in ContractRegistry.events {
            for field in event.fields { #expect(event.field(named: field.name) == field) }
            #expect(event.field(named: "no_such_field") == nil)
        }
    }

    @Test("Sync priorities order from critical to low")
    func priorities() {
        #expect([SyncPriority.low, .critical, .normal, .high].sorted() == [.critical, .high, .normal, .low])
        #expect(ConflictPolicy(rawValue: "last_writer_wins") == .lastWriterWins)
        #expect(
            Set(ConflictPolicy.allCases.map(\.rawValue)) == [
                "append_only", "server_authoritative", "last_writer_wins", "version_check", "field_merge",
            ])
    }

    @Test("The reference SHA-256 used by these tests matches the standard vectors")
    func referenceSHA256() {
        #expect(ReferenceSHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(ReferenceSHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            ReferenceSHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
        #expect(
            ReferenceSHA256.hex(String(repeating: "a", count: 1_000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        )
    }

    // MARK: Helpers

    static var allFields: [(contract: String, field: FieldDescriptor, current: Int)] {
        ContractRegistry.entities.flatMap { entity in entity.fields.map { (entity.name, $0, entity.currentVersion) } }
            + ContractRegistry.events.flatMap { event in event.fields.map { (event.name, $0, event.currentVersion) } }
    }

    static func placeholders(in template: String) -> [String] {
        var result: [String] = []
        var current: String?
        for character in template {
            if character == "{" {
                current = ""
            } else if character == "}", let name = current {
                result.append(name)
                current = nil
            } else if current != nil {
                current?.append(character)
            }
        }
        return result
    }
}

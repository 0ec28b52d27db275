import ContractRuntime
import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// `max_bytes` on a field (the most bytes a value may take as stored) and on a contract (the
/// largest row): what they accept, the defaults in force without them, the diagnostic for each
/// misuse, the registry they generate and their place in the lock. (Lowering either is
/// MAX_BYTES_REDUCED: CompatibilityCaseTable.)
@Suite("Byte limits", .blockingWork)
struct ByteLimitTests {
    /// An entity with `fields` after its key, and `top` lines after its sync line (line 6).
    private func entity(_ fields: [String], top: [String] = []) -> String {
        let lines =
            [
                "entity: Thing", "summary: A thing.", "version: 1", "table: things", "scope: user",
                "sync: { direction: both, conflict: last_writer_wins }",
            ] + top + ["fields:", "  id: { type: id, primary_key: true }"] + fields.map { "  " + $0 }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Values and defaults

    @Test(
        "a field's max_bytes takes bytes, with an optional decimal unit, up to 4MB",
        arguments: [("1", 1), ("800B", 800), ("64kB", 64_000), ("\"2MB\"", 2_000_000), ("4MB", 4_000_000), ("4000000", 4_000_000)]
    )
    func fieldValues(text: String, value: Int) throws {
        let contract = try compiledThing(entity(["payload: { type: json, max_bytes: \(text) }"], top: ["max_bytes: 4MB"]))
        #expect(contract.field(named: "payload")?.maxBytes == value)
        #expect(contract.field(named: "payload")?.effectiveMaxBytes == value)
    }

    @Test(
        "max_bytes applies to string, json, bytes and lists, optional or not",
        arguments: ["string", "string?", "json", "json?", "bytes", "bytes?", "list<int>", "list<string>?"])
    func applicableTypes(type: String) throws {
        let contract = try compiledThing(entity(["value: { type: \(type), max_bytes: 10kB }"]))
        #expect(contract.field(named: "value")?.effectiveMaxBytes == 10_000)
    }

    @Test("left out: 256kB a field, raised by a max_length that allows more; the row 1MB or twice its largest field")
    func defaults() throws {
        let plain = try compiledThing(entity(["doc: json", "note: { type: string, max_length: 100 }", "count: int", "at: timestamp"]))
        #expect(plain.maxBytes == nil && plain.field(named: "doc")?.maxBytes == nil)
        #expect(plain.field(named: "doc")?.effectiveMaxBytes == FieldDescriptor.defaultMaximumBytes)
        #expect(plain.field(named: "note")?.effectiveMaxBytes == 256_000)
        #expect(plain.field(named: "count")?.effectiveMaxBytes == nil)
        #expect(plain.field(named: "id")?.effectiveMaxBytes == nil, "ids keep their 256-byte rule")
        #expect(plain.effectiveMaxBytes == RowSize.defaultMaximumBytes)

        // A bytes field's max_length is bytes already; a string's allows four UTF-8 bytes a character.
        let photo = try compiledThing(entity(["photo: { type: bytes?, max_length: 2097152 }", "text: { type: string, max_length: 100000 }"]))
        #expect(photo.field(named: "photo")?.effectiveMaxBytes == 2_097_152)
        #expect(photo.field(named: "text")?.effectiveMaxBytes == 400_000)
        #expect(photo.effectiveMaxBytes == 4_000_000, "twice 2097152, at most the ceiling")

        let raised = try compiledThing(entity(["doc: { type: json, max_bytes: 700kB }"]))
        #expect(raised.effectiveMaxBytes == 1_400_000)
    }

    @Test("the compiler's limits are the runtime's: the generated descriptors agree")
    func runtimeAgrees() throws {
        let contract = try compiledThing(
            entity(["doc: json", "photo: { type: bytes?, max_length: 2097152 }", "tags: { type: list<string>, max_bytes: 2kB }"]))
        let fields = contract.fields.map { FieldDescriptor(name: $0.name, kind: $0.type.type, maxLength: $0.maxLength, maxBytes: $0.maxBytes) }
        #expect(fields.map(\.maxBytes) == contract.fields.map(\.effectiveMaxBytes))
        #expect(RowSize.defaultMaximumBytes(fields: fields) == contract.effectiveMaxBytes)
    }

    // MARK: Diagnostics

    @Test(
        "max_bytes on a type without a byte limit is MAX_BYTES_NOT_APPLICABLE",
        arguments: ["id", "int", "double?", "bool", "timestamp", "date", "uuid", "ref<Thing>?"])
    func notApplicable(type: String) throws {
        #expect(
            try folderReport(entity(["other: { type: \(type), max_bytes: 100 }"])) == """
                contracts/entities/thing.yaml:9:\(20 + type.count): error[MAX_BYTES_NOT_APPLICABLE]: `max_bytes` does not apply to type `\(type.replacingOccurrences(of: "?", with: ""))`
                  help: `max_bytes` limits string, json, bytes, list and file fields (an id is at most 256 bytes); remove it here
                1 error, 0 warnings
                """)
    }

    @Test("an enum says so too")
    func notApplicableToEnums() throws {
        #expect(
            try folderReport(entity(["state: { type: enum, values: [a, b], max_bytes: 100 }"])) == """
                contracts/entities/thing.yaml:9:40: error[MAX_BYTES_NOT_APPLICABLE]: `max_bytes` does not apply to type `enum`
                  help: `max_bytes` limits string, json, bytes, list and file fields (an id is at most 256 bytes); remove it here
                1 error, 0 warnings
                """)
    }

    private static let sizeHelp = "write a whole number of bytes, optionally with a decimal unit: `500000`, `500kB`, `10MB`, `1GB`"
    private static let ceilingHelp =
        "a row travels whole in one push, which the server takes up to 5 MiB; keep larger files out of rows (upload them, and store their key)"

    @Test(
        "a bad field max_bytes says what it must be, at the value",
        arguments: [
            ("0", "max_bytes must be at least 1 byte, found '0'", "leave the key out for the default"),
            ("5MB", "max_bytes '5MB' is above the largest size, 4MB", ceilingHelp),
            ("4000001", "max_bytes '4000001' is above the largest size, 4MB", ceilingHelp),
            ("64KiB", "max_bytes '64KiB' is not a size", "binary units are not accepted; \(sizeHelp)"),
            ("64KB", "max_bytes '64KB' is not a size", "did you mean '64kB'? (units are B, kB, MB and GB, written without a space)"),
            ("-5", "max_bytes '-5' is not a size", sizeHelp),
            ("[1]", "max_bytes must be a size, found a sequence", sizeHelp),
        ]
    )
    func badFieldValue(text: String, message: String, help: String) throws {
        #expect(
            try folderReport(entity(["doc: { type: json, max_bytes: \(text) }"])) == """
                contracts/entities/thing.yaml:9:33: error[INVALID_VALUE]: \(message)
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test(
        "a bad contract max_bytes says what it must be, at the value",
        arguments: [
            ("0", "max_bytes must be at least 1 byte, found '0'", "leave the key out for the default"),
            ("5MB", "max_bytes '5MB' is above the largest size, 4MB", ceilingHelp),
            ("1 MB", "max_bytes '1 MB' is not a size", "did you mean '1MB'? (units are B, kB, MB and GB, written without a space)"),
        ]
    )
    func badContractValue(text: String, message: String, help: String) throws {
        #expect(
            try folderReport(entity(["doc: json"], top: ["max_bytes: \(text)"])) == """
                contracts/entities/thing.yaml:7:12: error[INVALID_VALUE]: \(message)
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test("a field limit above the contract's max_bytes is MAX_BYTES_ABOVE_ROW_LIMIT, with a note at the row limit")
    func aboveRowLimit() throws {
        #expect(
            try folderReport(entity(["doc: { type: json, max_bytes: 2MB }"], top: ["max_bytes: 1MB"])) == """
                contracts/entities/thing.yaml:10:22: error[MAX_BYTES_ABOVE_ROW_LIMIT]: field 'doc' may take more bytes (max_bytes 2MB) than its contract's max_bytes, 1MB
                  note: the row limit is set here (contracts/entities/thing.yaml:7:1)
                  help: raise the contract's `max_bytes` (at most 4MB) or lower the field's
                1 error, 0 warnings
                """)
    }

    @Test("a max_length above the row limit is refused too; the plain default is not")
    func maxLengthAboveRowLimit() throws {
        #expect(
            try folderReport(entity(["photo: { type: bytes, max_length: 300000 }"], top: ["max_bytes: 200kB"])) == """
                contracts/entities/thing.yaml:10:3: error[MAX_BYTES_ABOVE_ROW_LIMIT]: field 'photo' may take more bytes (300000 bytes by its max_length) than its contract's max_bytes, 200kB
                  note: the row limit is set here (contracts/entities/thing.yaml:7:1)
                  help: raise the contract's `max_bytes` (at most 4MB) or lower the field's
                1 error, 0 warnings
                """)
        #expect(
            try folderReport(entity(["photo: { type: bytes, max_length: 5000000 }"])) == """
                contracts/entities/thing.yaml:9:3: error[MAX_BYTES_ABOVE_ROW_LIMIT]: field 'photo' may take more bytes (5000000 bytes by its max_length) than its contract's default row limit, 4MB
                  help: a row takes at most 4MB; lower the field's max_length, or give it a smaller `max_bytes`
                1 error, 0 warnings
                """)
        // A small row limit with fields left at the default: the row check at write time bounds them.
        _ = try compiledThing(entity(["doc: json", "note: string"], top: ["max_bytes: 100kB"]))
    }

    @Test("events take both keys")
    func events() throws {
        let event = """
            event: Happened
            summary: Something happened.
            version: 1
            scope: user
            max_bytes: 3MB
            fields:
              picture: { type: bytes?, max_bytes: 2500kB }

            """
        let set = try compileValid(["events/happened.yaml": event])
        let contract = try #require(set.contract(named: "Happened"))
        #expect(contract.maxBytes == 3_000_000 && contract.field(named: "picture")?.maxBytes == 2_500_000)
        let registry = RegistryGenerator(set: set).render()
        #expect(registry.contains("appliesTo: nil,\n        maxBytes: 3000000,\n"), "\(registry)")
        #expect(registry.contains("FieldDescriptor(name: \"picture\", kind: .bytes, isOptional: true, maxBytes: 2500000)"))
    }

    @Test("local fields take no max_bytes: they never leave the device")
    func localFields() throws {
        let text = entity(["doc: json"]) + "local:\n  draft: { type: json?, max_bytes: 10kB }\n"
        #expect(try folderReport(text).contains("error[UNKNOWN_KEY]"))
    }

    // MARK: Generated code, JSON Schema and the lock

    @Test("the registry and DTO docs write max_bytes only where the contract does")
    func registry() throws {
        let set = try compileValid([
            "entities/thing.yaml": entity(["doc: { type: json, max_bytes: 64kB }", "note: string"], top: ["max_bytes: 2MB"]),
            "entities/gadget.yaml": entity(["doc: json"]).replacingOccurrences(of: "Thing", with: "Gadget").replacingOccurrences(
                of: "things", with: "gadgets"),
        ])
        let registry = RegistryGenerator(set: set).render()
        #expect(registry.contains("priority: .normal,\n        maxBytes: 2000000,\n        currentVersion: 1,"), "\(registry)")
        #expect(registry.contains("FieldDescriptor(name: \"doc\", kind: .json, maxBytes: 64000),"))
        #expect(registry.contains("FieldDescriptor(name: \"note\", kind: .string),"))
        let gadget = try #require(registry.components(separatedBy: "public static let gadget = EntityDescriptor(").last)
        let gadgetDescriptor = try #require(gadget.components(separatedBy: "public static let").first)
        #expect(!gadgetDescriptor.contains("maxBytes"))
        let dto = ContractCompiler.generate(set).first { $0.path.hasSuffix("Thing.swift") }?.contents ?? ""
        #expect(dto.contains("At most 64000 bytes as stored."))
    }

    @Test("the JSON Schema offers max_bytes on fields and contracts, not on local fields")
    func jsonSchema() {
        #expect(ContractGrammar.fieldDetails.keyNames.contains("max_bytes"))
        #expect(ContractGrammar.entity.keyNames.contains("max_bytes"))
        #expect(ContractGrammar.event.keyNames.contains("max_bytes"))
        #expect(!ContractGrammar.localFieldDetails.keyNames.contains("max_bytes"))
        #expect(ContractJSONSchema.render().contains("The most bytes a string, json, bytes or list value may take"))
    }

    @Test("a snapshot writes max_bytes only when written, so versions locked without it keep their checksums")
    func snapshot() throws {
        let plain = try compiledThing(entity(["doc: json"]))
        let text = ContractSnapshot.text(plain)
        #expect(!text.contains("max_bytes"))
        let limited = try compiledThing(entity(["doc: { type: json, max_bytes: 1500 }"], top: ["max_bytes: 2MB"]))
        let limitedText = ContractSnapshot.text(limited)
        #expect(limitedText.contains("\nmax_bytes: 2MB\n"))
        #expect(limitedText.contains("doc: { type: json, max_bytes: 1500B }"))
        // Written at the default value, the key is still a change of the released text.
        let atDefault = try compiledThing(entity(["doc: json"], top: ["max_bytes: 1MB"]))
        #expect(ContractSnapshot.checksum(atDefault) != ContractSnapshot.checksum(plain))
    }

    @Test("written on a new version, max_bytes locks and reads back")
    func locked() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        let item = { (version: Int, top: String, field: String) in
            """
            entity: Item
            summary: An item.
            version: \(version)
            table: items
            scope: user
            sync: { direction: both, conflict: last_writer_wins }
            \(top)
            fields:
              id: { type: id, primary_key: true }
              \(field)

            """
        }
        try workspace.write(item(1, "", "doc: json"), to: "entities/item.yaml")
        try workspace.lock()
        try workspace.write(item(1, "max_bytes: 2MB", "doc: { type: json, max_bytes: 512kB }"), to: "entities/item.yaml")
        #expect(try workspace.check().diagnostics.sorted.map(\.rule) == [.versionNotBumped])

        try workspace.write(item(2, "max_bytes: 2MB", "doc: { type: json, max_bytes: 512kB }"), to: "entities/item.yaml")
        let check = try workspace.check()
        #expect(check.diagnostics.diagnostics.isEmpty, "\(workspace.readable(check.diagnostics))")
        #expect(try workspace.lock().newVersions == ["Item v2"])
        var diagnostics = DiagnosticCollector()
        let lock = try #require(LockFile.read(path: workspace.lockPath, diagnostics: &diagnostics))
        #expect(diagnostics.diagnostics.isEmpty)
        let v2 = try #require(lock.contracts["Item"]?.last?.contract)
        #expect(v2.maxBytes == 2_000_000 && v2.field(named: "doc")?.maxBytes == 512_000)

        // Version 3 lowering both: two findings, the field's (against version 1 already, whose
        // default is 256kB) and the row's.
        try workspace.write(item(3, "max_bytes: 1MB", "doc: { type: json, max_bytes: 100kB }"), to: "entities/item.yaml")
        let lowered = try workspace.check()
        #expect(lowered.diagnostics.sorted.map(\.rule) == [.maxBytesReduced, .maxBytesReduced], "\(workspace.readable(lowered.diagnostics))")
        let messages = lowered.diagnostics.sorted.map(\.message)
        #expect(messages.contains("max_bytes of 'doc' went down to 100kB from 256kB (the default) in version 1"), "\(messages)")
        #expect(messages.contains("the row limit of 'Item' went down to 1MB from 2MB in version 2"), "\(messages)")
    }
}

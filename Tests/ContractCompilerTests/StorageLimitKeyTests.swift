import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// The sync block's `max_rows` and `max_row_bytes`: what they accept, the diagnostic for each bad
/// value, their refusal on events, the registry they generate and their place in the lock.
@Suite("Storage limit keys", .blockingWork)
struct StorageLimitKeyTests {
    /// An entity whose sync block (lines 6 to 10) ends with the limits given.
    private func entity(maxRows: String? = nil, maxRowBytes: String? = nil) -> String {
        var lines = [
            "entity: Thing", "summary: A thing.", "version: 1", "table: things", "scope: user",
            "sync:", "  direction: both", "  conflict: last_writer_wins",
        ]
        if let maxRows { lines.append("  max_rows: \(maxRows)") }
        if let maxRowBytes { lines.append("  max_row_bytes: \(maxRowBytes)") }
        lines += ["fields:", "  id: { type: id, primary_key: true }"]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Valid values

    @Test("left out, an entity has no limits of its own")
    func absent() throws {
        let sync = try compiledThing(entity()).sync
        #expect(sync.maxRows == nil)
        #expect(sync.maxRowBytes == nil)
    }

    @Test("max_rows takes a whole number from 1", arguments: [("1", 1), ("50", 50), ("2147483647", 2_147_483_647)])
    func maxRows(text: String, value: Int) throws {
        #expect(try compiledThing(entity(maxRows: text)).sync.maxRows == value)
    }

    @Test(
        "max_row_bytes takes bytes, with an optional decimal unit",
        arguments: [
            ("1", 1), ("500000", 500_000), ("800B", 800), ("64kB", 64_000), ("10MB", 10_000_000), ("1GB", 1_000_000_000),
            ("\"2MB\"", 2_000_000), ("1000GB", 1_000_000_000_000),
        ]
    )
    func maxRowBytes(text: String, value: Int) throws {
        #expect(try compiledThing(entity(maxRowBytes: text)).sync.maxRowBytes == value)
    }

    // MARK: Bad values, each with its diagnostic at the value's line and column

    @Test(
        "a bad max_rows says what it must be",
        arguments: [
            ("0", "must be a whole number from 1 to 2147483647, found '0'"),
            ("-3", "must be a whole number from 1 to 2147483647, found '-3'"),
            ("\"50\"", "must be a whole number from 1 to 2147483647, found '50'"),
            ("1.5", "must be a whole number from 1 to 2147483647, found '1.5'"),
            ("50MB", "must be a whole number from 1 to 2147483647, found '50MB'"),
            ("3000000000", "must be a whole number from 1 to 2147483647, found '3000000000'"),
            ("[50]", "must be a whole number from 1 to 2147483647, found a sequence"),
            ("", "must be a whole number from 1 to 2147483647, found an empty value"),
        ]
    )
    func badMaxRows(text: String, message: String) throws {
        // An empty value is where libyaml puts it: right after the colon.
        let column = text.isEmpty ? 12 : 13
        #expect(
            try folderReport(entity(maxRows: text)) == """
                contracts/entities/thing.yaml:9:\(column): error[INVALID_VALUE]: max_rows \(message)
                  help: write the most rows a device keeps, without quotes, for example `max_rows: 50`; leave the key out for no limit
                1 error, 0 warnings
                """)
    }

    private static let sizeHelp = "write a whole number of bytes, optionally with a decimal unit: `500000`, `500kB`, `10MB`, `1GB`"

    @Test(
        "a bad max_row_bytes says what it must be",
        arguments: [
            ("10mb", "max_row_bytes '10mb' is not a size", "did you mean '10MB'? (units are B, kB, MB and GB, written without a space)"),
            ("64KB", "max_row_bytes '64KB' is not a size", "did you mean '64kB'? (units are B, kB, MB and GB, written without a space)"),
            ("10 MB", "max_row_bytes '10 MB' is not a size", "did you mean '10MB'? (units are B, kB, MB and GB, written without a space)"),
            ("10MiB", "max_row_bytes '10MiB' is not a size", "binary units are not accepted; \(sizeHelp)"),
            ("1.5MB", "max_row_bytes '1.5MB' is not a size", sizeHelp),
            ("010MB", "max_row_bytes '010MB' is not a size", sizeHelp),
            ("-1", "max_row_bytes '-1' is not a size", sizeHelp),
            ("MB", "max_row_bytes 'MB' is not a size", sizeHelp),
            ("big", "max_row_bytes 'big' is not a size", sizeHelp),
            ("0", "max_row_bytes must be at least 1 byte, found '0'", "leave the key out for no limit"),
            ("0MB", "max_row_bytes must be at least 1 byte, found '0MB'", "leave the key out for no limit"),
            ("1001GB", "max_row_bytes '1001GB' is above the largest size, 1000GB", "leave the key out for no limit"),
            ("{ mb: 10 }", "max_row_bytes must be a size, found a mapping", sizeHelp),
            ("", "max_row_bytes must be a size, found an empty value", sizeHelp),
        ]
    )
    func badMaxRowBytes(text: String, message: String, help: String) throws {
        let column = text.isEmpty ? 17 : 18
        #expect(
            try folderReport(entity(maxRowBytes: text)) == """
                contracts/entities/thing.yaml:9:\(column): error[INVALID_VALUE]: \(message)
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test("both bad in one flow-style sync block: both reported, each at its value")
    func bothBadInFlowStyle() throws {
        let text = entity().replacingOccurrences(
            of: "sync:\n  direction: both\n  conflict: last_writer_wins\n",
            with: "sync: { direction: both, conflict: last_writer_wins, max_rows: none, max_row_bytes: 5 GiB }\n"
        )
        #expect(
            try folderReport(text) == """
                contracts/entities/thing.yaml:6:64: error[INVALID_VALUE]: max_rows must be a whole number from 1 to 2147483647, found 'none'
                  help: write the most rows a device keeps, without quotes, for example `max_rows: 50`; leave the key out for no limit
                contracts/entities/thing.yaml:6:85: error[INVALID_VALUE]: max_row_bytes '5 GiB' is not a size
                  help: binary units are not accepted; \(Self.sizeHelp)
                2 errors, 0 warnings
                """)
    }

    @Test("events refuse both keys, like retention and priority", arguments: ["max_rows: 50", "max_row_bytes: 10MB"])
    func refusedOnEvents(key: String) throws {
        let event = """
            event: Happened
            summary: Something happened.
            version: 1
            scope: user
            sync: { direction: up, \(key) }
            fields:
              at: timestamp
            """
        let name = String(key.prefix { $0 != ":" })
        #expect(
            try folderReport(event, file: "events/happened.yaml") == """
                contracts/events/happened.yaml:5:24: error[UNKNOWN_KEY]: key '\(name)' is not allowed in the sync block
                  help: events are immutable and kept until the server folds them; only `direction` (and `conflict: append_only`) apply
                1 error, 0 warnings
                """)
    }

    // MARK: Generated registry and JSON Schema

    @Test("the registry writes the limits a contract sets, and nothing for one without")
    func registry() throws {
        let set = try compileValid([
            "entities/thing.yaml": entity(maxRows: "50", maxRowBytes: "10MB"),
            "entities/gadget.yaml": entity().replacingOccurrences(of: "Thing", with: "Gadget").replacingOccurrences(of: "things", with: "gadgets"),
        ])
        let registry = RegistryGenerator(set: set).render()
        #expect(
            registry.contains(
                """
                        priority: .normal,
                        maxRows: 50,
                        maxRowBytes: 10000000,
                        currentVersion: 1,
                """))
        let other = try #require(registry.components(separatedBy: "public static let gadget = EntityDescriptor(").last)
        let otherDescriptor = try #require(other.components(separatedBy: "public static let").first)
        #expect(!otherDescriptor.contains("maxRows") && !otherDescriptor.contains("maxRowBytes"))
    }

    @Test("the JSON Schema offers both keys on an entity's sync block only")
    func jsonSchema() throws {
        #expect(ContractGrammar.entitySync.keyNames.contains("max_rows"))
        #expect(ContractGrammar.entitySync.keyNames.contains("max_row_bytes"))
        #expect(!ContractGrammar.eventSync.keyNames.contains("max_rows"))
        #expect(!ContractGrammar.eventSync.keyNames.contains("max_row_bytes"))
        let pattern = try Regex(ContractGrammar.size)
        for good in ["1", "800B", "64kB", "10MB", "1GB"] { #expect(good.wholeMatch(of: pattern) != nil, "\(good)") }
        for bad in ["0", "010MB", "10mb", "10 MB", "10MiB", "1.5MB"] { #expect(bad.wholeMatch(of: pattern) == nil, "\(bad)") }
    }

    // MARK: The lock

    private func item(version: Int, limits: String = "") -> String {
        """
        entity: Item
        summary: An item.
        version: \(version)
        table: items
        scope: user
        sync: { direction: both, conflict: last_writer_wins\(limits) }
        fields:
          id: { type: id, primary_key: true }

        """
    }

    @Test("a snapshot writes the limits only when set, so versions locked without them keep their checksums")
    func snapshot() throws {
        let without = try #require(try compileValid(["entities/item.yaml": item(version: 1)]).contract(named: "Item"))
        #expect(
            ContractSnapshot.text(without).contains(
                "sync: { direction: both, conflict: last_writer_wins, tombstones: true, retention: forever, priority: normal }\n"
            ))
        let with = try #require(
            try compileValid(["entities/item.yaml": item(version: 1, limits: ", max_rows: 50, max_row_bytes: 10000000")]).contract(named: "Item")
        )
        #expect(
            ContractSnapshot.text(with).contains(
                "sync: { direction: both, conflict: last_writer_wins, tombstones: true, retention: forever, priority: normal, max_rows: 50, max_row_bytes: 10MB }\n"
            ))
        #expect(ContractSnapshot.checksum(with) != ContractSnapshot.checksum(without))
    }

    @Test("changing the limits of a released version needs a new version, which locks and reads back")
    func versioned() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(item(version: 1), to: "entities/item.yaml")
        try workspace.lock()
        let released = try #require(workspace.lockText())

        try workspace.write(item(version: 1, limits: ", max_rows: 50, max_row_bytes: 1500"), to: "entities/item.yaml")
        #expect(try workspace.check().diagnostics.sorted.map(\.rule) == [.versionNotBumped])

        try workspace.write(item(version: 2, limits: ", max_rows: 50, max_row_bytes: 1500"), to: "entities/item.yaml")
        let check = try workspace.check()
        #expect(check.diagnostics.diagnostics.isEmpty, "\(workspace.readable(check.diagnostics))")
        #expect(try workspace.lock().newVersions == ["Item v2"])
        let text = try #require(workspace.lockText())
        let releasedBlock = try #require(released.components(separatedBy: "\nmigrations:").first)
        #expect(text.hasPrefix(releasedBlock + "\n    - version: 2\n"), "version 1's entry must not change:\n\(text)")
        #expect(text.contains("priority: normal, max_rows: 50, max_row_bytes: 1500B }"))
        // A version that changes only the limits changes no table: no migration step.
        #expect(!text.contains("items.v2"))

        var diagnostics = DiagnosticCollector()
        let lock = try #require(LockFile.read(path: workspace.lockPath, diagnostics: &diagnostics))
        #expect(diagnostics.diagnostics.isEmpty)
        let v2 = try #require(lock.contracts["Item"]?.last?.contract)
        #expect(v2.sync.maxRows == 50)
        #expect(v2.sync.maxRowBytes == 1500)
        #expect(try workspace.check().diagnostics.diagnostics.isEmpty)
    }
}

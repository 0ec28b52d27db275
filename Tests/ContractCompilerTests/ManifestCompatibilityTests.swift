import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// The manifest's `compatibility:` sets the mode of every contract that names none: a change
/// one mode refuses passes under another, and a contract's own `compatibility` still wins.
@Suite("Manifest compatibility defaults", .blockingWork)
struct ManifestCompatibilityTests {
    private static func manifest(_ compatibility: String?) -> String {
        ContractFolder.defaultManifest + (compatibility.map { "\ncompatibility: \($0)\n" } ?? "\n")
    }

    /// The rules `check` reports for `a: int` (released) becoming `new` (version 2).
    private func rules(manifest compatibility: String?, new: [String], mode: String? = nil, kind: ContractText.Kind = .entity) throws -> [RuleID] {
        let workspace = try CompatWorkspace(manifest: Self.manifest(compatibility))
        defer { workspace.remove() }
        try workspace.write(ContractText(kind: kind, version: 1, fields: ["a: int"], mode: mode))
        try workspace.lock()
        try workspace.write(ContractText(kind: kind, version: 2, fields: new, mode: mode))
        return try workspace.check().diagnostics.sorted.map(\.rule)
    }

    @Test("entities: int → double breaks the default (full), passes when the manifest says backward")
    func entitiesMode() throws {
        #expect(try rules(manifest: nil, new: ["a: double"]) == [.fieldTypeChanged])
        #expect(try rules(manifest: "{ entities: full }", new: ["a: double"]) == [.fieldTypeChanged])
        #expect(try rules(manifest: "{ entities: backward }", new: ["a: double"]).isEmpty)
        #expect(try rules(manifest: "{ entities: forward }", new: ["a: double"]) == [.fieldTypeChanged])
    }

    @Test("entities: none compares no fields, so a removed field passes")
    func entitiesNone() throws {
        #expect(try rules(manifest: nil, new: ["b: int?"]) == [.fieldRemoved])
        #expect(try rules(manifest: "{ entities: none }", new: ["b: int?"]).isEmpty)
    }

    @Test("a contract's own compatibility overrides the manifest's")
    func contractWins() throws {
        #expect(try rules(manifest: "{ entities: backward }", new: ["a: double"], mode: "full") == [.fieldTypeChanged])
    }

    @Test("events: a required field added breaks backward (the default), passes when the manifest says forward")
    func eventsMode() throws {
        #expect(try rules(manifest: nil, new: ["a: int", "b: int"], kind: .event) == [.requiredFieldAdded])
        #expect(try rules(manifest: "{ events: forward }", new: ["a: int", "b: int"], kind: .event).isEmpty)
    }
}

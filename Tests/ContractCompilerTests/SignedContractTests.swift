import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// `signed: true`: what the language accepts, what the generated metadata carries, and the
/// compatibility rule for turning it on while devices that do not sign are still supported.
@Suite("Signed contracts", .blockingWork)
struct SignedContractTests {
    private static let signedEvent = """
        event: ReadingTaken
        summary: A meter reading.
        version: 1
        scope: user
        signed: true
        fields:
          meter_id: id
          value: double
        """

    private static let signedStatement = """
        entity: Note
        summary: An immutable note.
        version: 1
        table: notes
        scope: user
        signed: true
        sync: { direction: up, conflict: append_only }
        fields:
          id: { type: id, primary_key: true }
          text: string
        """

    @Test("an event and an append-only entity may be signed; the registry and the snapshot say so")
    func signedCompiles() throws {
        let set = try compileValid(["events/reading_taken.yaml": Self.signedEvent, "entities/note.yaml": Self.signedStatement])
        #expect(set.contract(named: "ReadingTaken")?.isSigned == true)
        #expect(set.contract(named: "Note")?.isSigned == true)
        let registry = try #require(ContractCompiler.generate(set).first { $0.path == "ContractRegistry.swift" }?.contents)
        let event = try #require(registry.range(of: "public static let readingTaken = EventDescriptor("))
        let entity = try #require(registry.range(of: "public static let note = EntityDescriptor("))
        #expect(registry[event.upperBound...].prefix(600).contains("isSigned: true,"))
        #expect(registry[entity.upperBound...].prefix(800).contains("isSigned: true,"))
        #expect(ContractSnapshot.text(try #require(set.contract(named: "Note"))).contains("\nsigned: true\n"))
    }

    @Test("an unsigned contract generates no isSigned argument and keeps its snapshot")
    func unsignedUnchanged() throws {
        let unsigned = Self.signedEvent.replacingOccurrences(of: "signed: true\n", with: "")
        let set = try compileValid(["events/reading_taken.yaml": unsigned])
        let registry = try #require(ContractCompiler.generate(set).first { $0.path == "ContractRegistry.swift" }?.contents)
        #expect(!registry.contains("isSigned"))
        #expect(!ContractSnapshot.text(try #require(set.contract(named: "ReadingTaken"))).contains("signed"))
    }

    @Test("signed on an entity whose rows change, or on a contract devices never write, is refused at its line")
    func signedNotAllowed() throws {
        let mutable = Self.signedStatement.replacingOccurrences(of: "append_only", with: "last_writer_wins")
        let folder = try ContractFolder(files: ["entities/note.yaml": mutable])
        defer { folder.remove() }
        let finding = try #require(folder.load().diagnostics.diagnostics.first { $0.rule == .signedNotAllowed }, "\(folder.report())")
        #expect(finding.location.file.hasSuffix("entities/note.yaml"))
        #expect(finding.location.line == lineNumber(of: "signed: true", in: mutable))

        let down = """
            entity: Notice
            summary: Published notices.
            version: 1
            table: notices
            scope: content
            signed: true
            sync: { direction: down, conflict: server_authoritative }
            fields:
              id: { type: id, primary_key: true }
            """
        let downFolder = try ContractFolder(files: ["entities/notice.yaml": down])
        defer { downFolder.remove() }
        #expect(downFolder.load().diagnostics.diagnostics.contains { $0.rule == .signedNotAllowed }, "\(downFolder.report())")

        let notBoolean = Self.signedEvent.replacingOccurrences(of: "signed: true", with: "signed: sometimes")
        let badFolder = try ContractFolder(files: ["events/reading_taken.yaml": notBoolean])
        defer { badFolder.remove() }
        #expect(badFolder.load().diagnostics.hasErrors, "\(badFolder.report())")
    }

    private static func event(version: Int, oldest: Int = 1, signed: Bool) -> ContractText {
        ContractText(
            kind: .event, version: version, fields: ["meter_id: id"], oldest: oldest, extra: signed ? ["signed: true"] : [])
    }

    @Test("turning signed on while an unsigned version is supported is SIGNED_TURNED_ON, at the signed line")
    func turningSignedOn() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(Self.event(version: 1, signed: false))
        try workspace.lock()
        let v2 = Self.event(version: 2, signed: true)
        try workspace.write(v2)
        let result = try workspace.check()
        let finding = try #require(
            result.diagnostics.diagnostics.first { $0.rule == .signedTurnedOn }, "\(workspace.readable(result.diagnostics))")
        #expect(finding.location.file == workspace.path("events/item_logged.yaml"))
        #expect(finding.location.line == lineNumber(of: "signed: true", in: v2.yaml))
        #expect(finding.message.contains("version 1"), "\(finding.message)")
        #expect(finding.notes.first?.location?.file == workspace.lockPath)
        #expect(RuleCatalog.explanation(for: .signedTurnedOn) != nil)
    }

    @Test("turning signed on with oldest_supported past every unsigned version passes; turning it off passes")
    func signedOnWithRaisedFloor() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(Self.event(version: 1, signed: false))
        try workspace.lock()
        try workspace.write(Self.event(version: 2, oldest: 2, signed: true))
        let raised = try workspace.check()
        #expect(!raised.diagnostics.diagnostics.contains { $0.rule == .signedTurnedOn }, "\(workspace.readable(raised.diagnostics))")
        try workspace.lock()

        try workspace.write(Self.event(version: 3, oldest: 2, signed: false))
        let off = try workspace.check()
        #expect(!off.diagnostics.diagnostics.contains { $0.rule == .signedTurnedOn }, "\(workspace.readable(off.diagnostics))")
    }

    @Test("a signed version changed to unsigned without a bump is a changed released version")
    func signedIsPartOfTheReleasedSchema() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(Self.event(version: 1, signed: true))
        try workspace.lock()
        try workspace.write(Self.event(version: 1, signed: false))
        let result = try workspace.check()
        #expect(result.diagnostics.diagnostics.contains { $0.rule == .versionNotBumped }, "\(workspace.readable(result.diagnostics))")
    }
}

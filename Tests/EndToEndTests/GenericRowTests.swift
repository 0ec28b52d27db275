import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncServer
import Testing

/// `create`, `rows`, `show`, `edit` and `delete`, which work on any entity through the generated
/// registry, with the real `sync-server` and `sync-device` binaries. ServiceAsset has no command
/// of its own, so everything here goes through the generic path.
@Suite("sync-device generic row commands", .serialized, .blockingWork)
struct GenericRowTests {
    static let tool = "team-1-tool-1"

    @Test("a service asset created on one device is listed, shown, edited and deleted on another; the first sees the result")
    func createListShowEditDelete() async throws {
        let stage = try Stage()
        let ana = try stage.device("tablet-a", user: "op-ana", teams: [Stage.team])
        let ben = try stage.device("tablet-b", user: "op-ben", teams: [Stage.team])

        let charger = try Self.createdID(
            try ana.ok([
                "create", "service-asset", "--field", "asset_tag=CHG-9", "--field", "display_name=Charger 9", "--field", "category=charger",
                "--field", "battery_level=0.5",
            ]))
        #expect(ULID(charger) != nil, "an `id` key is made as a ULID: \(charger)")
        try ana.ok([
            "create", "ServiceAsset", "--id", Self.tool, "--field", "asset_tag=TOOL-1", "--field", "display_name=Torque wrench",
            "--field", "category=tool",
        ])

        // On the device at once, with the contract's defaults and the device's team filled in.
        let mine = try ana.json(["rows", "service_assets", "--where", "asset_tag=CHG-9"])["rows"].array
        #expect(mine.count == 1, "\(mine)")
        let row = try #require(mine.first)
        #expect(row["unsynced_changes"].int == 1)
        #expect(row["row"]["id"].string == charger)
        #expect(row["row"]["team_id"].string == Stage.team)
        #expect(row["row"]["status"].string == "in_service")
        #expect(row["row"]["battery_level"].double == 0.5)

        // The text table: a header, then a line per row, `*` on the two not on the server yet.
        let lines = try ana.ok(["rows", "service-asset"]).stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(lines)")
        #expect(lines.first?.hasPrefix("  id ") == true && lines.first?.contains("asset_tag") == true, "\(lines)")
        #expect(lines.filter { $0.hasPrefix("* ") }.count == 2, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("* \(charger) ") && $0.contains("Charger 9") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("  team-1-vehicle-017 ") }, "\(lines)")

        try ana.ok(["sync"])
        try ben.ok(["sync"])
        let chargers = try ben.json(["rows", "service-asset", "--where", "category=charger"])["rows"].array
        #expect(chargers.map { $0["row"]["id"].string } == [charger])
        let shown = try ben.json(["show", "ServiceAsset", charger])
        #expect(shown["row"]["display_name"].string == "Charger 9")
        #expect(shown["row"]["team_id"].string == Stage.team)
        #expect(shown["unsynced_changes"].int == 0)
        #expect(shown["server_version"].int != nil, "\(shown)")
        let text = try ben.ok(["show", "service-asset", Self.tool]).stdout
        #expect(text.hasPrefix("ServiceAsset \(Self.tool)\n"), "\(text)")
        let fieldLines = text.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
        #expect(fieldLines.contains("display_name Torque wrench") && fieldLines.contains("serial_number —"), "\(text)")
        #expect(text.hasSuffix("server version 1, synced just now\n"), "\(text)")

        try ben.ok(["edit", "service-asset", charger, "--field", "status=needs_service"])
        try ben.ok(["delete", "service-asset", Self.tool])
        #expect(try ben.run(["show", "service-asset", Self.tool]).status == 6)
        try ben.ok(["sync"])
        try ana.ok(["sync"])

        let edited = try ana.json(["show", "service-asset", charger])
        #expect(edited["row"]["status"].string == "needs_service", "\(edited)")
        let deleted = try ana.run(["show", "service-asset", Self.tool])
        #expect(deleted.status == 6, "\(deleted)")
        #expect(deleted.stderr.contains("no ServiceAsset '\(Self.tool)' on this device"), "\(deleted)")
        let left = try ana.json(["rows", "service-asset"])["rows"].array.compactMap { $0["row"]["id"].string }
        #expect(Set(left) == ["team-1-vehicle-017", "team-1-battery-204", charger])

        try stage.server.stop()
        let onServer = try #require(try await stage.serverRow(ServiceAsset.descriptor, id: charger))
        #expect(onServer["status"] == .string("needs_service"))
        #expect(onServer["category"] == .string("charger"))
        let tombstone = try await stage.storage().read { reader in
            try await reader.row(in: ContractTable(ServiceAsset.descriptor), tenant: Stage.tenant, id: Self.tool)
        }
        #expect(tombstone?.integer("_deleted") == 1, "the deletion reached the server")
        try await stage.expectEveryWriteOnceOnServer(ana)
        try await stage.expectEveryWriteOnceOnServer(ben)
    }

    @Test("unknown entities and fields, bad values, missing fields, server-owned entities and missing rows are refused, storing nothing")
    func refusals() async throws {
        let stage = try Stage()
        let device = try stage.device("misused", user: "u-1", teams: [Stage.team])
        let asset = ["create", "service-asset", "--field", "asset_tag=X-1", "--field", "display_name=X", "--field", "category=tool"]

        for (arguments, status, message) in [
            (["rows", "spaceship"], Int32(64), "no entity contract is named 'spaceship'"),
            (["rows", "spaceship"], 64, "help: entities: assessment, assessment-response,"),
            (["show", "servce-asset", "x"], 64, "did you mean 'service-asset'?"),
            (["create", "servce_asset", "--field", "asset_tag=X"], 64, "did you mean 'service-asset'?"),
            (asset + ["--field", "colour=red"], 64, "ServiceAsset has no field 'colour'"),
            (asset + ["--field", "battery_level=full"], 64, "ServiceAsset.battery_level = 'full': expects a number"),
            (asset + ["--field", "status=broken"], 64, "expects one of in_service, needs_service"),
            (asset + ["--field", "id=x"], 64, "ServiceAsset.id cannot be set with --field: it is the primary key"),
            (asset + ["--field", "updated_at=now"], 64, "the server sets it"),
            (
                ["create", "service-asset", "--field", "asset_tag=X-1"], 64,
                "ServiceAsset needs --field display_name=<string> --field category=<enum"
            ),
            (["create", "incident", "--field", "number=INC-9"], 64, "Incident needs --field short_description=<string>"),
            (
                ["create", "unit", "--field", "title=Mine"], 64,
                "Unit rows cannot be created on a device: it travels from the server to devices only"
            ),
            (["delete", "lesson", "lesson-battery-safety"], 64, "Lesson rows cannot be deleted on a device"),
            (["delete", "statement", "s-1"], 64, "Statement cannot be written on a device: it is append-only"),
            (["rows", "service-asset", "--where", "colour=red"], 64, "ServiceAsset has no field 'colour'"),
            (["rows", "service-asset", "--where", "battery_level=full"], 64, "expects a number"),
            (["rows", "service-asset", "--where", "category"], 64, "--where 'category' is not name=value"),
            (["show", "service-asset", "nowhere"], 6, "no ServiceAsset 'nowhere' on this device"),
            (["delete", "service-asset", "nowhere"], 6, "no ServiceAsset 'nowhere' on this device"),
            (
                [
                    "create", "service-asset", "--id", "team-1-vehicle-017", "--field", "asset_tag=X-2", "--field", "display_name=X",
                    "--field", "category=tool",
                ], 2, "a ServiceAsset with id 'team-1-vehicle-017' already exists"
            ),
        ] {
            let result = try device.run(arguments)
            #expect(result.status == status, "\(result)")
            #expect(result.stderr.contains(message), "\(result)")
        }
        #expect(try device.json(["status"])["pending"].int == 0, "a refused command stored nothing")

        // Lists of the server's entities are readable; an empty match says so.
        #expect(try device.json(["rows", "unit"])["rows"].array.count == 2)
        let none = try device.ok(["rows", "service-asset", "--where", "serial_number=nowhere"])
        #expect(none.stdout == "no ServiceAsset rows matching serial_number=nowhere on this device\n", "\(none)")
        let empty = try device.json(["rows", "service-asset", "--where", "serial_number=null"])["rows"].array
        #expect(empty.map { $0["row"]["id"].string } == ["team-1-battery-204"])
    }

    /// The id `create` printed: `created ServiceAsset ID; queued; …`.
    static func createdID(_ result: CommandResult) throws -> String {
        let words = result.stdout.split(separator: " ")
        guard words.count > 2, words[0] == "created", words[2].hasSuffix(";") else {
            throw Device.Unexpected(description: "no created id in \(result)")
        }
        return String(words[2].dropLast())
    }
}

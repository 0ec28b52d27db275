import ContractRuntime
import Foundation
import InspectionContracts
import SyncClient
import Testing

/// The example's own server command (`inspections-server`, a few lines of main on
/// `SyncServerCommands`), run as its operator runs it: its help, its tokens (which record the
/// crew's membership), two inspectors' tablets syncing a row through it, and its audit log.
@Suite struct InspectionServerCommandTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test("inspections-server: the whole command on the example's contracts; two tablets sync through it")
    func twoTabletsSyncThroughTheExamplesOwnServer() async throws {
        let server = try InspectionServerProcess(.sqlite)

        // Every subcommand of the engine's, named as the example names it; no sample content to seed.
        let help = try server.command(["--help"])
        #expect(help.status == 0, "\(help)")
        #expect(help.stdout.contains("USAGE: inspections-server <subcommand>"))
        for subcommand in ["serve", "token", "keys", "revoke", "teams", "erase", "export", "audit", "housekeeping", "sinks", "fleet"] {
            #expect(help.stdout.contains("\n  \(subcommand) "), "missing \(subcommand)")
        }
        #expect(!help.stdout.contains("\n  seed "))

        try server.start()
        defer { try? server.stop() }
        let a = try TestTablet(server, user: "inspector-a", device: "tablet-a", clock: ManualClock(Self.start))
        let b = try TestTablet(server, user: "inspector-b", device: "tablet-b", clock: ManualClock(Self.start))

        let started = try a.tablet.startInspection(site: "Pump station 4", checklist: ["Exits clear", "Guard rails fixed"])
        await a.sync()
        await b.sync()
        #expect(try b.tablet.inspections().map(\.siteName) == ["Pump station 4"])
        #expect(try b.tablet.checklist(of: started.id).map(\.label) == ["Exits clear", "Guard rails fixed"])

        // The command's other subcommands work on the example's data: its audit log verifies.
        try server.stop()
        let audit = try server.command(["audit", "verify", "--data", server.data.path])
        #expect(audit.status == 0, "\(audit)")
    }
}

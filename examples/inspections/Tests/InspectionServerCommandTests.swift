import ContractRuntime
import Foundation
import InspectionContracts
import OutpostTestSupport
import SyncClient
import Testing

/// The example's own server command (`inspections-server`, a few lines of main on
/// `SyncServerCommands`), run as its operator runs it: its help, its tokens (which record the crew's
/// membership), and two inspectors' devices syncing a row through it.
@Suite struct InspectionServerCommandTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test("inspections-server: the whole command on the example's contracts; two devices sync through it")
    func twoDevicesSyncThroughTheExamplesOwnServer() async throws {
        let folder = try TemporaryDirectory(prefix: "inspections-server")
        let server = SyncServerProcess(data: folder.url, executable: "inspections-server")

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
        func token(_ user: String, _ device: String) throws -> String {
            let result = try server.command([
                "token", "--data", folder.url.path, "--tenant", InspectionServerHarness.tenant, "--user", user, "--device", device, "--team",
                InspectionServerHarness.crew,
            ])
            #expect(result.status == 0, "\(result)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let (tokenA, tokenB) = (try token("inspector-a", "tablet-a"), try token("inspector-b", "tablet-b"))
        let url = try server.url
        let a = try InspectorDevice(
            transport: URLSessionTransport(baseURL: url, timeout: 10) { tokenA }, user: "inspector-a", device: "tablet-a",
            clock: ManualClock(Self.start))
        let b = try InspectorDevice(
            transport: URLSessionTransport(baseURL: url, timeout: 10) { tokenB }, user: "inspector-b", device: "tablet-b",
            clock: ManualClock(Self.start))

        try a.store.create(
            Inspection(id: "insp-1", teamId: InspectionServerHarness.crew, siteName: "Pump station 4", updatedAt: Timestamp(a.clock.now())))
        await a.sync()
        await b.sync()
        let pulled = try #require(try b.store.fetch(Inspection.self, id: "insp-1"))
        #expect(pulled.siteName == "Pump station 4")

        // The command's other subcommands work on the example's data: its audit log verifies.
        try server.stop()
        let audit = try server.command(["audit", "verify", "--data", folder.url.path])
        #expect(audit.status == 0, "\(audit)")
    }
}

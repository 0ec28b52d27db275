import Foundation
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The rollout gate on a live fleet: devices sync with a real `sync-server`, whose census
/// `contractc check --fleet-url` reads to tell what raising a contract's `oldest_supported` cuts off.
@Suite("The rollout gate reads a live server's census", .blockingWork)
struct RolloutGateStoryTests {
    /// The repository's `contracts` folder.
    static let contracts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("contracts", isDirectory: true)

    static func pull(_ server: URL, token: String, schema: String) async throws -> Int {
        var request = URLRequest(
            url: server.appendingPathComponent("sync/v1/pull").appending(queryItems: [URLQueryItem(name: "scope", value: "content")]))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue(schema, forHTTPHeaderField: "X-Outpost-Schema")
        request.setValue("learning-ios/2.0", forHTTPHeaderField: "X-Outpost-App")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test("raising Unit's oldest_supported past the version one of three devices runs: refused at 1 %, let through at 50 %")
    func gateOnTheLiveCensus() async throws {
        let stage = try Stage()
        let url = try stage.server.url
        for (device, unit) in [("tablet-old", 2), ("tablet-a", 3), ("tablet-b", 3)] {
            let token = try stage.server.token(user: "learner-\(device)", device: device, teams: [])
            #expect(try await Self.pull(url, token: token, schema: "Unit=\(unit)") == 200)
        }

        // The next release: Unit version 4, and devices on version 2 no longer supported.
        let work = stage.folder.appendingPathComponent("next-release", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Self.contracts, to: work.appendingPathComponent("contracts"))
        let unit = work.appendingPathComponent("contracts/entities/unit.yaml")
        let text = try String(contentsOf: unit, encoding: .utf8)
        let raised = text.replacingOccurrences(of: "\nversion: 3\n", with: "\nversion: 4\n").replacingOccurrences(
            of: "\noldest_supported: 2 ", with: "\noldest_supported: 3 ")
        #expect(raised != text)
        try raised.write(to: unit, atomically: true, encoding: .utf8)
        try Data((try stage.adminToken() + "\n").utf8).write(to: work.appendingPathComponent("admin.token"))

        let contractc = try BuiltProducts.executable("contractc")
        let arguments = [
            "check", "--contracts", "contracts", "--fleet-url", url.absoluteString + "/admin/v1/fleet?active=30d", "--token-file", "admin.token",
        ]
        let refused = try ChildProcess.run(contractc, arguments, in: work)
        #expect(refused.status == 1, "\(refused)")
        #expect(
            refused.stderr.contains(
                "contracts/entities/unit.yaml:5:19: error[FLEET_CUTOFF_EXCEEDED]: Unit: oldest_supported 2 → 3 refuses 1 of 3 active devices (33.33 %), above --max-cutoff 1 %"
            ), "\(refused.stderr)")
        let allowed = try ChildProcess.run(contractc, arguments + ["--max-cutoff", "50"], in: work)
        #expect(allowed.status == 0, "\(allowed)")
        #expect(allowed.stdout.contains("fleet: Unit: oldest_supported 2 → 3 refuses 1 of 3 active devices (33.33 %), within --max-cutoff 50 %"))
    }
}

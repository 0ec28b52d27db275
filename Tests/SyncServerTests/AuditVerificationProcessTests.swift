import Foundation
import GRDB
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sync-server serve --audit-verify-interval`: a real server verifies its audit chain on its
/// own and counts each outcome in /metrics, where the `OutpostAuditChainBroken` alert reads it.
@Suite("The server verifies its audit chain on its own", .blockingWork)
struct AuditVerificationProcessTests {
    static func metrics(_ server: SyncServerProcess, token: String) async throws -> String {
        var request = URLRequest(url: try server.url.appendingPathComponent("metrics"))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        return String(decoding: data, as: UTF8.self)
    }

    static func count(_ outcome: String, in text: String) -> Int? {
        let prefix = #"outpost_audit_verifications_total{outcome=""# + outcome + #""} "#
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
    }

    @Test("every interval it verifies the chain: ok, then broken once an entry is changed behind its back")
    func verifiesPeriodically() async throws {
        let folder = try TemporaryDirectory(prefix: "audit-verify")
        let data = folder.url.appendingPathComponent("server", isDirectory: true)
        let tokenFile = folder.url.appendingPathComponent("metrics.token")
        let token = "metrics-token-for-the-audit-verification-test"
        try Data(token.utf8).write(to: tokenFile)
        let server = SyncServerProcess(data: data, serveOptions: ["--audit-verify-interval", "1", "--metrics-token-file", tokenFile.path])
        let seeded = try server.command(["seed", "--data", data.path, "--tenant", "acme", "--team", "team-1"])
        #expect(seeded.status == 0, "\(seeded)")
        try server.start()
        defer { try? server.stop() }

        #expect(Self.count("broken", in: try await Self.metrics(server, token: token)) == 0, "shown at 0 from the start")
        await eventually("a verification passed") { (Self.count("ok", in: (try? await Self.metrics(server, token: token)) ?? "") ?? 0) >= 1 }

        let database = try DatabaseQueue(path: data.appendingPathComponent("server.sqlite").path)
        try await database.write { db in try db.execute(sql: "UPDATE audit_log SET detail = 'rewritten' WHERE id = 1") }
        try database.close()
        await eventually("a verification found the chain broken") {
            (Self.count("broken", in: (try? await Self.metrics(server, token: token)) ?? "") ?? 0) >= 1
        }
    }
}

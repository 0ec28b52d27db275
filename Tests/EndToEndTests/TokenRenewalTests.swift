import Foundation
import OutpostTestSupport
import Testing

/// Device tokens are short-lived: a device whose token expired gets a new one from its app (here,
/// the login's `--token-command`) when the server refuses the old one, and syncs on.
@Suite("Token renewal", .serialized, .blockingWork)
struct TokenRenewalTests {
    @Test("a token that expires between syncs is renewed through the token command, and the sync goes through")
    func renewal() async throws {
        let stage = try Stage()
        let server = stage.server
        let device = try Device("renewing", in: stage.folder)
        let issue = ["token", "--data", server.data.path, "--tenant", "demo", "--user", "u-1", "--device", "renewing"]
        let short = try server.command(issue + ["--ttl", "2"])
        #expect(short.status == 0, "\(short)")
        let shortToken = short.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let command = ([try SyncServerCommand.executable().path] + issue)
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        try device.ok(["login", "--server", try server.url.absoluteString, "--token", shortToken, "--token-command", command])
        try device.ok(["sync"])

        try await Task.sleep(for: .seconds(3))  // the login's token has expired now
        try device.ok(["sync"])
        let profile = try JSONSerialization.jsonObject(with: Data(contentsOf: device.home.appendingPathComponent("device.json"))) as? [String: Any]
        let stored = try #require(profile?["token"] as? String)
        #expect(stored != shortToken, "the renewed token is kept for the next runs")
    }
}

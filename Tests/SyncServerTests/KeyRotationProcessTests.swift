import Foundation
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sync-server keys rotate` beside a running `sync-server serve` of the same data folder: the
/// server takes the new key's tokens at once, with no restart.
@Suite("Key rotation reaches a running server", .blockingWork)
struct KeyRotationProcessTests {
    static func status(_ server: SyncServerProcess, token: String) async throws -> Int {
        var request = URLRequest(url: try server.url.appendingPathComponent("sync/v1/pull"))
        request.url = URL(string: request.url!.absoluteString + "?scope=user")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    static func token(_ server: SyncServerProcess) throws -> String {
        let issued = try server.command(["token", "--data", server.data.path, "--tenant", "acme", "--user", "alice", "--device", "phone"])
        #expect(issued.status == 0, "\(issued)")
        return issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a token of the key `keys rotate` just made is let in at once; the old key's until it is retired")
    func rotateWhileServing() async throws {
        let folder = try TemporaryDirectory(prefix: "key-rotation")
        let data = folder.url.appendingPathComponent("server", isDirectory: true)
        let server = SyncServerProcess(data: data)
        let seeded = try server.command(["seed", "--data", data.path, "--tenant", "acme", "--team", "team-1"])
        #expect(seeded.status == 0, "\(seeded)")
        try server.start()
        defer { try? server.stop() }
        let oldToken = try Self.token(server)
        #expect(try await Self.status(server, token: oldToken) == 200)

        let rotated = try server.command(["keys", "rotate", "--data", data.path])
        #expect(rotated.status == 0, "\(rotated)")
        let newToken = try Self.token(server)
        #expect(newToken != oldToken)
        #expect(try await Self.status(server, token: newToken) == 200, "\(server.output)")
        #expect(try await Self.status(server, token: oldToken) == 200, "the earlier key stays accepted")

        let oldKid = try #require(
            try server.command(["keys", "list", "--data", data.path]).stdout.split(separator: "\n").first { !$0.hasSuffix("current") }?
                .split(separator: "\t").first.map(String.init))
        let retired = try server.command(["keys", "retire", "--data", data.path, oldKid])
        #expect(retired.status == 0, "\(retired)")
        await eventually("the retired key is refused") { (try? await Self.status(server, token: oldToken)) == 401 }
        #expect(try await Self.status(server, token: newToken) == 200)
    }
}

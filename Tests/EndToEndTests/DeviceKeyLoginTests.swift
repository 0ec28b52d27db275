import Foundation
import OutpostTestSupport
import Testing

/// `sync-device login` registers the device's signing key with the server, for the token's
/// identity; logging in again keeps it, and `sync-server audit export` shows the registration.
@Suite("Device key at login", .serialized)
struct DeviceKeyLoginTests {
    @Test("login registers the key once; the audit export names its fingerprint")
    func loginRegistersTheKey() async throws {
        let stage = try Stage()
        let server = stage.server
        let device = try Device("signer", in: stage.folder)
        let token = try server.token(user: "u-1", device: "signer", teams: [Stage.team])
        let first = try device.ok(["login", "--server", try server.url.absoluteString, "--token", token])
        let line = try #require(first.stdout.split(separator: "\n").first { $0.hasPrefix("device key: ") }, "\(first)")
        #expect(line.hasSuffix("(registered)"), "\(line)")
        let fingerprint = String(line.dropFirst("device key: ".count).prefix(64))
        #expect(fingerprint.count == 64 && fingerprint.allSatisfy(\.isHexDigit), "\(line)")

        let again = try device.ok(["login", "--server", try server.url.absoluteString, "--token", token])
        #expect(again.stdout.contains("device key: \(fingerprint) (unchanged)"), "\(again)")
        try device.ok(["sync"])

        let exportFile = stage.folder.appendingPathComponent("audit.jsonl")
        let export = try server.command(["audit", "export", "--data", server.data.path, "--out", exportFile.path])
        #expect(export.status == 0, "\(export)")
        let exported = try String(contentsOf: exportFile, encoding: .utf8)
        let registrations = exported.split(separator: "\n").filter { $0.contains("\"register_key\"") }
        #expect(registrations.count == 1, "\(exported)")
        #expect(registrations.first?.contains(fingerprint) == true, "\(exported)")
    }
}

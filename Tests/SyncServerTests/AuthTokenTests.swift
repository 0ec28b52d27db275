import Foundation
import Testing

@testable import SyncServer

@Suite("Auth: device tokens and the signing key")
struct AuthTokenTests {
    static let identity = DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-1", teams: ["team-1", "team-2"], isAdmin: false, expiresAt: 2_000_000_000)

    static func temporaryFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sync-auth-\(UUID().uuidString)")
    }

    @Test("a token is base64url claims and signature, and verifies back to its identity")
    func roundTrip() throws {
        let signer = try TokenSigner(secret: Data(repeating: 1, count: 32))
        let token = signer.sign(Self.identity)
        let parts = token.split(separator: ".")
        #expect(parts.count == 2)
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." })
        let claims = try #require(Base64URL.decode(String(parts[0])))
        #expect(String(decoding: claims, as: UTF8.self) == #"{"adm":false,"dev":"d-1","exp":2000000000,"tms":["team-1","team-2"],"tnt":"acme","usr":"u-1"}"#)
        #expect(try signer.verify(token, now: 1_999_999_999) == Self.identity)
        #expect(signer.sign(Self.identity) == token, "signing is deterministic")
    }

    @Test("expired, re-signed, edited or malformed tokens are refused with distinct messages")
    func refusals() throws {
        let signer = try TokenSigner(secret: Data(repeating: 1, count: 32))
        let token = signer.sign(Self.identity)
        func message(_ token: String, now: Int64 = 1_000) -> String? {
            do {
                _ = try signer.verify(token, now: now)
                return nil
            } catch {
                #expect(error.status == 401)
                #expect(error.detail.code == .unauthorized)
                return error.detail.message
            }
        }
        #expect(message(token, now: 2_000_000_000)?.contains("expired at 2033-05-18T03:33:20Z") == true)
        #expect(message(token, now: 1_999_999_999) == nil)

        let other = try TokenSigner(secret: Data(repeating: 2, count: 32)).sign(Self.identity)
        #expect(message(other)?.contains("signature does not match") == true)

        var admin = Self.identity
        admin.isAdmin = true
        let forgedClaims = signer.sign(admin).split(separator: ".")[0]
        #expect(message("\(forgedClaims).\(token.split(separator: ".")[1])")?.contains("signature does not match") == true)

        for malformed in ["", "abc", "a.b.c", "!!.??", "\(token)."] {
            #expect(message(malformed)?.contains("malformed") == true, "\(malformed)")
        }
    }

    @Test("secrets shorter than 32 bytes are refused")
    func shortSecret() {
        #expect(throws: TokenKeyError.tooShort(source: "the secret", bytes: 16)) {
            try TokenSigner(secret: Data(repeating: 1, count: 16))
        }
    }

    @Test("DIR/token.key is created once, 32 random bytes as hex, mode 0600, and reused")
    func keyFile() throws {
        let folder = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        let file = folder.appendingPathComponent("token.key")
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let text = String(decoding: try Data(contentsOf: file), as: UTF8.self)
        #expect(text.count == 65 && text.hasSuffix("\n"), "64 hex characters and a newline")
        #expect(text.dropLast().allSatisfy { $0.isHexDigit })
        let second = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        #expect(try second.verify(first.sign(Self.identity), now: 0) == Self.identity)

        let elsewhere = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let third = try TokenKey.signer(secretFile: nil, dataDirectory: elsewhere, environment: [:])
        #expect(throws: ServiceError.self) { try third.verify(first.sign(Self.identity), now: 0) }
    }

    @Test("--secret-file wins over OUTPOST_TOKEN_SECRET, which wins over the data folder")
    func precedence() throws {
        let folder = Self.temporaryFolder()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let secretFile = folder.appendingPathComponent("secret")
        let text = String(repeating: "s", count: 40)
        try Data((text + "\n").utf8).write(to: secretFile)
        let environmentText = String(repeating: "e", count: 40)

        let fromFile = try TokenKey.signer(secretFile: secretFile, dataDirectory: folder, environment: [TokenKey.environmentVariable: environmentText])
        let expected = try TokenSigner(secret: Data(text.utf8))
        #expect(try expected.verify(fromFile.sign(Self.identity), now: 0) == Self.identity, "the trailing newline is not part of the key")

        let fromEnvironment = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [TokenKey.environmentVariable: environmentText])
        #expect(try TokenSigner(secret: Data(environmentText.utf8)).verify(fromEnvironment.sign(Self.identity), now: 0) == Self.identity)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("token.key").path))

        #expect(throws: TokenKeyError.noSource) { try TokenKey.signer(secretFile: nil, dataDirectory: nil, environment: [:]) }
        #expect(throws: TokenKeyError.unreadable(path: "/no/such/secret")) {
            try TokenKey.signer(secretFile: URL(fileURLWithPath: "/no/such/secret"), dataDirectory: nil, environment: [:])
        }
        #expect(throws: TokenKeyError.self) {
            try TokenKey.signer(secretFile: nil, dataDirectory: nil, environment: [TokenKey.environmentVariable: "short"])
        }
    }
}

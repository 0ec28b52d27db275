import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

@Suite("Auth: device tokens and the signing key", .blockingWork)
struct AuthTokenTests {
    static let identity = DeviceIdentity(
        tenant: "acme", userID: "u-1", deviceID: "d-1", teams: ["team-1", "team-2"], isAdmin: false, expiresAt: 2_000_000_000)

    /// ``identity`` as a token issued at 0 verifies back.
    static var issued: DeviceIdentity {
        var identity = identity
        identity.issuedAt = 0
        return identity
    }

    static func temporaryFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sync-auth-\(UUID().uuidString)")
    }

    @Test("a token is a JWT with a kid, and verifies back to its identity (teams only as a hint)")
    func roundTrip() async throws {
        let signer = try TokenSigner(secret: Data(repeating: 1, count: 32))
        let token = signer.sign(Self.identity, issuedAt: 1_000)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        let header = try #require(Base64URL.decode(String(parts[0])))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"HS256","kid":"\#(signer.keyID)","typ":"JWT"}"#)
        let claims = try #require(Base64URL.decode(String(parts[1])))
        #expect(
            String(decoding: claims, as: UTF8.self)
                == #"{"aud":"outpost-sync","device":"d-1","exp":2000000000,"iat":1000,"sub":"u-1","teams":["team-1","team-2"],"tenant":"acme"}"#
        )
        var expected = Self.identity
        expected.issuedAt = 1_000
        #expect(try await signer.verify(token, now: 1_999_999_999) == expected)
        #expect(signer.sign(Self.identity, issuedAt: 1_000) == token, "signing is deterministic")
    }

    @Test("expired, re-signed, edited or malformed tokens are refused, each with its code")
    func refusals() async throws {
        let signer = try TokenSigner(secret: Data(repeating: 1, count: 32))
        let token = signer.sign(Self.identity, issuedAt: 1_000)
        func code(_ token: String, now: Int64 = 1_000) async -> ErrorCode? {
            do {
                _ = try await signer.verify(token, now: now)
                return nil
            } catch {
                #expect(error.status == 401)
                return error.detail.code
            }
        }
        #expect(await code(token, now: 2_000_000_000) == .tokenExpired)
        #expect(await code(token, now: 1_999_999_999) == nil)
        // The same kid, another secret: the signature does not hold.
        let other = try TokenSigner(secret: Data(repeating: 2, count: 32), keyID: signer.keyID).sign(Self.identity, issuedAt: 1_000)
        #expect(await code(other) == .tokenInvalidSignature)
        var admin = Self.identity
        admin.isAdmin = true
        let forged = signer.sign(admin, issuedAt: 1_000).split(separator: ".")
        let tokenParts = token.split(separator: ".")
        #expect(await code("\(forged[0]).\(forged[1]).\(tokenParts[2])") == .tokenInvalidSignature)
        for malformed in ["", "abc", "a.b.c", "!!.??.!!", "\(token)."] {
            #expect(await code(malformed) == .tokenMalformed, "\(malformed)")
        }
    }

    @Test("secrets shorter than 32 bytes are refused")
    func shortSecret() {
        #expect(throws: TokenKeyError.tooShort(source: "the secret", bytes: 16)) {
            try TokenSigner(secret: Data(repeating: 1, count: 16))
        }
    }

    @Test("DIR/token.key is created once, 32 random bytes as hex, mode 0600, and reused")
    func keyFile() async throws {
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
        #expect(try await second.verify(first.sign(Self.identity, issuedAt: 0), now: 0) == Self.issued)

        let elsewhere = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let third = try TokenKey.signer(secretFile: nil, dataDirectory: elsewhere, environment: [:])
        await #expect(throws: ServiceError.self) { try await third.verify(first.sign(Self.identity), now: 0) }
    }

    @Test("--secret-file wins over OUTPOST_TOKEN_SECRET, which wins over the data folder")
    func precedence() async throws {
        let folder = Self.temporaryFolder()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let secretFile = folder.appendingPathComponent("secret")
        let text = String(repeating: "s", count: 40)
        try Data((text + "\n").utf8).write(to: secretFile)
        let environmentText = String(repeating: "e", count: 40)

        let fromFile = try TokenKey.signer(
            secretFile: secretFile, dataDirectory: folder, environment: [TokenKey.environmentVariable: environmentText])
        let expected = try TokenSigner(secret: Data(text.utf8))
        #expect(
            try await expected.verify(fromFile.sign(Self.identity, issuedAt: 0), now: 0) == Self.issued, "the trailing newline is not part of the key"
        )

        let fromEnvironment = try TokenKey.signer(
            secretFile: nil, dataDirectory: folder, environment: [TokenKey.environmentVariable: environmentText])
        #expect(
            try await TokenSigner(secret: Data(environmentText.utf8)).verify(fromEnvironment.sign(Self.identity, issuedAt: 0), now: 0) == Self.issued)
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

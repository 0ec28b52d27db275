import ContractRuntime
import Foundation

/// A signed-in console session: an admin token exchanged for a cookie.
package struct ConsoleSession: Hashable, Sendable {
    package var tenant: String
    package var userID: String
    package var deviceID: String
    /// When the admin token the session was opened with was issued (seconds since 1970): a
    /// revocation of the admin's device or user refuses the session as it would the token.
    package var tokenIssuedAt: Int64
    /// The kid of the server's own key that signed the admin token: once that key is retired
    /// (no longer accepted by the keyring the API verifies with), the session ends. `nil` for a
    /// session stored before kids were kept, which is refused.
    package var keyID: String?
    /// The session's public name on the Sessions page and in its "end" form: derived from the
    /// session id's digest, it opens nothing.
    package var handle: String
    /// The token every form of the session carries (`csrf`).
    package var csrfToken: String
    /// Seconds since 1970.
    package var createdAt: Int64
    package var expiresAt: Int64
}

/// The console's sessions, in the server's `console_sessions` table (SQL both storages speak,
/// ``StorageReader/serverTableQuery(_:_:)``), so a session opened on one process holds on every
/// other and across restarts, and ending one (signing out, the Sessions page, the cap, a retired
/// key, a revocation) ends it on every process at its next request.
///
/// The session id (256 random bits) lives only in the admin's cookie; the table keys the session
/// by the id's SHA-256, so a copy of the database opens no session. The Sessions page names a
/// session by its handle, the first 32 hex digits of the SHA-256 of that digest.
package struct ConsoleSessionStore: Sendable {
    let storage: any SyncStorage

    package init(storage: any SyncStorage) {
        self.storage = storage
    }

    /// 256 random bits, base64url without padding (43 characters).
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Whether `text` could be a value of ``randomToken()`` (a session id or a CSRF token): 43
    /// base64url characters. Anything else is refused before it is hashed or compared.
    static func isWellFormedToken(_ text: String) -> Bool {
        text.utf8.count == 43
            && text.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
            }
    }

    /// Whether `text` could be a session's ``ConsoleSession/handle``: 32 lowercase hex digits.
    static func isWellFormedHandle(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    static func digest(of id: String) -> String { Hex.sha256(Data(id.utf8)) }

    static func handle(ofDigest digest: String) -> String { String(Hex.sha256(Data(digest.utf8)).prefix(32)) }

    /// Opens a session for `identity`, whose token was signed with the server's own key `keyID`,
    /// until `expiresAt`; returns the session id for the cookie.
    ///
    /// In the same transaction, sessions expired by `now` are deleted, and the tenant keeps at
    /// most `limit` sessions (``IdentityStateLimits/consoleSessionsPerTenant``): past it, its
    /// oldest ones end. The new session is never among them.
    package func open(
        for identity: DeviceIdentity, keyID: String, now: Int64, expiresAt: Int64, limit: Int
    ) async throws -> (id: String, session: ConsoleSession) {
        let id = Self.randomToken()
        let digest = Self.digest(of: id)
        let session = ConsoleSession(
            tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, tokenIssuedAt: identity.issuedAt ?? now,
            keyID: keyID, handle: Self.handle(ofDigest: digest), csrfToken: Self.randomToken(), createdAt: now, expiresAt: expiresAt)
        _ = try await storage.write { transaction in
            _ = try await transaction.serverTableQuery(
                "DELETE FROM console_sessions WHERE expires_at <= ? RETURNING id_sha256", [.integer(now)])
            _ = try await transaction.serverTableQuery(
                """
                INSERT INTO console_sessions (id_sha256, tenant, user_id, device_id, token_issued_at, csrf_token, created_at, expires_at, key_id, handle)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id_sha256
                """,
                [
                    .text(digest), .text(session.tenant), .text(session.userID), .text(session.deviceID), .integer(session.tokenIssuedAt),
                    .text(session.csrfToken), .integer(session.createdAt), .integer(session.expiresAt), .text(keyID), .text(session.handle),
                ])
            // The tenant's newest `limit - 1` others stay beside the new one; older ones end.
            return try await transaction.serverTableQuery(
                """
                DELETE FROM console_sessions WHERE tenant = ? AND id_sha256 <> ? AND id_sha256 NOT IN (
                    SELECT id_sha256 FROM console_sessions WHERE tenant = ? AND id_sha256 <> ?
                    ORDER BY created_at DESC, id_sha256 DESC LIMIT ?
                ) RETURNING id_sha256
                """,
                [.text(session.tenant), .text(digest), .text(session.tenant), .text(digest), .integer(Int64(max(1, limit) - 1))])
        }
        return (id, session)
    }

    /// The session of a cookie's id, unless it expired by `now`.
    package func session(id: String, now: Int64) async throws -> ConsoleSession? {
        guard Self.isWellFormedToken(id) else { return nil }
        let rows = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM console_sessions WHERE id_sha256 = ? AND expires_at > ?", [.text(Self.digest(of: id)), .integer(now)])
        }
        return rows.first.map(Self.session)
    }

    /// The tenant's sessions open at `now`, newest first, at most `limit`.
    package func sessions(tenant: String, now: Int64, limit: Int) async throws -> [ConsoleSession] {
        try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM console_sessions WHERE tenant = ? AND expires_at > ? ORDER BY created_at DESC, id_sha256 DESC LIMIT ?",
                [.text(tenant), .integer(now), .integer(Int64(max(0, limit)))]
            ).map(Self.session)
        }
    }

    private static func session(_ row: StoredRow) -> ConsoleSession {
        let digest = row.text("id_sha256") ?? ""
        return ConsoleSession(
            tenant: row.text("tenant") ?? "", userID: row.text("user_id") ?? "", deviceID: row.text("device_id") ?? "",
            tokenIssuedAt: row.integer("token_issued_at") ?? 0, keyID: row.text("key_id"),
            handle: row.text("handle") ?? handle(ofDigest: digest), csrfToken: row.text("csrf_token") ?? "",
            createdAt: row.integer("created_at") ?? 0, expiresAt: row.integer("expires_at") ?? 0)
    }

    /// Ends a session (signing out); `false` when there was none.
    @discardableResult
    package func close(id: String) async throws -> Bool {
        try await storage.write { transaction in
            try await !transaction.serverTableQuery(
                "DELETE FROM console_sessions WHERE id_sha256 = ? RETURNING id_sha256", [.text(Self.digest(of: id))]
            ).isEmpty
        }
    }

    /// Ends the session of `tenant` named `handle` (the Sessions page); `false` when the tenant
    /// has none of that name.
    @discardableResult
    package func close(handle: String, tenant: String) async throws -> Bool {
        try await storage.write { transaction in
            try await !transaction.serverTableQuery(
                "DELETE FROM console_sessions WHERE tenant = ? AND handle = ? RETURNING id_sha256", [.text(tenant), .text(handle)]
            ).isEmpty
        }
    }
}

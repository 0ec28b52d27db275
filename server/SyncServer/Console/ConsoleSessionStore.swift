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
    /// The token every form of the session carries (`csrf`).
    package var csrfToken: String
    /// Seconds since 1970.
    package var createdAt: Int64
    package var expiresAt: Int64
}

/// The console's sessions, in the server's `console_sessions` table (SQL both storages speak,
/// ``StorageReader/serverTableQuery(_:_:)``), so a session opened on one process holds on every
/// other and across restarts.
///
/// The session id (256 random bits) lives only in the admin's cookie; the table keys the session
/// by the id's SHA-256, so a copy of the database opens no session.
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

    static func digest(of id: String) -> String { Hex.sha256(Data(id.utf8)) }

    /// Opens a session for `identity` until `expiresAt`; returns the session id for the cookie.
    /// Sessions expired by `now` are deleted on the way.
    package func open(for identity: DeviceIdentity, now: Int64, expiresAt: Int64) async throws -> (id: String, session: ConsoleSession) {
        let id = Self.randomToken()
        let session = ConsoleSession(
            tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, tokenIssuedAt: identity.issuedAt ?? now,
            csrfToken: Self.randomToken(), createdAt: now, expiresAt: expiresAt)
        _ = try await storage.write { transaction in
            _ = try await transaction.serverTableQuery(
                "DELETE FROM console_sessions WHERE expires_at <= ? RETURNING id_sha256", [.integer(now)])
            return try await transaction.serverTableQuery(
                """
                INSERT INTO console_sessions (id_sha256, tenant, user_id, device_id, token_issued_at, csrf_token, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id_sha256
                """,
                [
                    .text(Self.digest(of: id)), .text(session.tenant), .text(session.userID), .text(session.deviceID),
                    .integer(session.tokenIssuedAt), .text(session.csrfToken), .integer(session.createdAt), .integer(session.expiresAt),
                ])
        }
        return (id, session)
    }

    /// The session of a cookie's id, unless it expired by `now`.
    package func session(id: String, now: Int64) async throws -> ConsoleSession? {
        let rows = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM console_sessions WHERE id_sha256 = ? AND expires_at > ?", [.text(Self.digest(of: id)), .integer(now)])
        }
        return rows.first.map { row in
            ConsoleSession(
                tenant: row.text("tenant") ?? "", userID: row.text("user_id") ?? "", deviceID: row.text("device_id") ?? "",
                tokenIssuedAt: row.integer("token_issued_at") ?? 0, csrfToken: row.text("csrf_token") ?? "",
                createdAt: row.integer("created_at") ?? 0, expiresAt: row.integer("expires_at") ?? 0)
        }
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
}

import ContractRuntime
import Crypto
import Foundation

/// The sinks' two tables (`sinks`, `sink_dead_letters`), read and written in SQL both storages
/// speak alike (``StorageReader/serverTableQuery(_:_:)``).
///
/// Every write of a sink's delivery state names the lease holder it expects: a process that lost
/// its lease (paused past it, then resumed) changes nothing, so only one process delivers a sink
/// at a time and its batches stay in order.
package struct SinkStore: Sendable {
    let storage: any SyncStorage

    package init(storage: any SyncStorage) {
        self.storage = storage
    }

    // MARK: Reading

    /// How many sinks `tenant` holds.
    package func count(tenant: String) async throws -> Int {
        try await storage.read { reader in
            Int(try await reader.serverTableQuery("SELECT COUNT(*) AS n FROM sinks WHERE tenant = ?", [.text(tenant)]).first?.integer("n") ?? 0)
        }
    }

    package func sinks(tenant: String? = nil) async throws -> [Sink] {
        let key = storage.auditKey
        return try await storage.read { reader in
            let rows =
                if let tenant {
                    try await reader.serverTableQuery("SELECT * FROM sinks WHERE tenant = ? ORDER BY id", [.text(tenant)])
                } else {
                    try await reader.serverTableQuery("SELECT * FROM sinks ORDER BY tenant, id", [])
                }
            return rows.map { Self.sink($0, key: key) }
        }
    }

    package func sink(tenant: String, id: String) async throws -> Sink? {
        let key = storage.auditKey
        return try await storage.read { reader in
            try await reader.serverTableQuery("SELECT * FROM sinks WHERE tenant = ? AND id = ?", [.text(tenant), .text(id)])
                .first.map { Self.sink($0, key: key) }
        }
    }

    package func deadLetters(tenant: String, sinkID: String, after: Int64 = 0, limit: Int = 100) async throws -> [DeadLetter] {
        try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM sink_dead_letters WHERE tenant = ? AND sink_id = ? AND id > ? ORDER BY id LIMIT ?",
                [.text(tenant), .text(sinkID), .integer(after), .integer(Int64(limit))]
            ).map(Self.deadLetter)
        }
    }

    // MARK: Adding and removing

    /// Adds a sink that starts at `cursor` (the feed's end now, unless it asked for the whole
    /// log kept).
    package func add(_ sink: Sink) async throws {
        let sealed = try Self.seal(sink.secrets, tenant: sink.tenant, id: sink.id, key: storage.auditKey)
        let options = String(decoding: try JSONEncoder.sorted.encode(sink.options), as: UTF8.self)
        _ = try await storage.write { transaction in
            try await transaction.serverTableQuery(
                """
                INSERT INTO sinks (tenant, id, kind, url, contracts, sealed_secret, options, created_at, cursor)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [
                    .text(sink.tenant), .text(sink.id), .text(sink.kind), .text(sink.url),
                    sink.contracts.map { .text($0.joined(separator: ",")) } ?? .null, .text(sealed), .text(options),
                    .integer(sink.createdAt), .text(sink.cursor.text),
                ])
        }
    }

    /// Removes a sink and its dead letters; `false` when there was none.
    package func remove(tenant: String, id: String) async throws -> Bool {
        try await storage.write { transaction in
            _ = try await transaction.serverTableQuery(
                "DELETE FROM sink_dead_letters WHERE tenant = ? AND sink_id = ? RETURNING id", [.text(tenant), .text(id)])
            return try await !transaction.serverTableQuery("DELETE FROM sinks WHERE tenant = ? AND id = ? RETURNING id", [.text(tenant), .text(id)])
                .isEmpty
        }
    }

    // MARK: Delivering

    /// Takes the sink's lease for `holder` until `until` when it is free, expired or already
    /// `holder`'s; the sink as it is then, or `nil` when another process holds it.
    package func claim(tenant: String, id: String, holder: String, now: Int64, until: Int64) async throws -> Sink? {
        let key = storage.auditKey
        return try await storage.write { transaction in
            try await transaction.serverTableQuery(
                """
                UPDATE sinks SET lease_holder = ?, lease_until = ?
                WHERE tenant = ? AND id = ? AND (lease_holder IS NULL OR lease_holder = ? OR lease_until < ?) RETURNING *
                """,
                [.text(holder), .integer(until), .text(tenant), .text(id), .text(holder), .integer(now)]
            ).first.map { Self.sink($0, key: key) }
        }
    }

    /// Gives the lease back (a process stopping), so another takes the sink at once.
    package func release(_ sink: Sink, holder: String) async throws {
        _ = try await update(sink, holder: holder, set: "lease_holder = NULL, lease_until = 0", [])
    }

    /// Extends the lease; `false` when it was lost.
    package func renew(_ sink: Sink, holder: String, until: Int64) async throws -> Bool {
        try await update(sink, holder: holder, set: "lease_until = ?", [.integer(until)])
    }

    /// Records the batch about to be sent, before it is sent: after a crash it is sent again
    /// with the same key. `false` when the lease was lost.
    package func begin(_ sink: Sink, pending: Sink.Pending, holder: String, leaseUntil: Int64) async throws -> Bool {
        try await update(
            sink, holder: holder, set: "pending_until = ?, pending_key = ?, attempts = 0, next_attempt_at = 0, lease_until = ?",
            [.text(pending.until.text), .text(pending.key), .integer(leaseUntil)])
    }

    /// Moves the sink past what it examined without a batch to send (changes of other tenants
    /// or contracts, or none left of a batch in flight).
    package func skip(_ sink: Sink, to cursor: ChangeFeed.Cursor, holder: String, leaseUntil: Int64) async throws -> Bool {
        try await update(
            sink, holder: holder, set: "cursor = ?, pending_until = NULL, pending_key = NULL, attempts = 0, next_attempt_at = 0, lease_until = ?",
            [.text(cursor.text), .integer(leaseUntil)])
    }

    /// The receiver acknowledged the batch in flight: the sink moves past it.
    package func delivered(_ sink: Sink, to cursor: ChangeFeed.Cursor, changes: Int, at now: Int64, holder: String, leaseUntil: Int64) async throws
        -> Bool
    {
        try await update(
            sink, holder: holder,
            set: """
                cursor = ?, pending_until = NULL, pending_key = NULL, attempts = 0, next_attempt_at = 0, last_error = NULL,
                delivered = delivered + ?, delivered_at = ?, lease_until = ?
                """,
            [.text(cursor.text), .integer(Int64(changes)), .integer(now), .integer(leaseUntil)])
    }

    /// The batch in flight failed and is sent again at `nextAttemptAt`.
    package func failed(_ sink: Sink, attempts: Int, nextAttemptAt: Int64, error: String, holder: String, leaseUntil: Int64) async throws -> Bool {
        try await update(
            sink, holder: holder, set: "attempts = ?, next_attempt_at = ?, last_error = ?, lease_until = ?",
            [.integer(Int64(attempts)), .integer(nextAttemptAt), .text(error), .integer(leaseUntil)])
    }

    /// The receiver refused the batch in flight: it is parked as a dead letter and the sink moves
    /// past it, both in one transaction.
    package func deadLetter(
        _ sink: Sink, to cursor: ChangeFeed.Cursor, letter: DeadLetter, holder: String, leaseUntil: Int64
    ) async throws -> Bool {
        try await storage.write { transaction in
            let moved = try await !transaction.serverTableQuery(
                """
                UPDATE sinks SET cursor = ?, pending_until = NULL, pending_key = NULL, attempts = 0, next_attempt_at = 0, last_error = ?,
                lease_until = ? WHERE tenant = ? AND id = ? AND lease_holder = ? RETURNING id
                """,
                [
                    .text(cursor.text), .text(SinkRequest.category(status: letter.status) + ": parked as a dead letter"), .integer(leaseUntil),
                    .text(sink.tenant),
                    .text(sink.id), .text(holder),
                ]
            ).isEmpty
            guard moved else { return false }
            _ = try await transaction.serverTableQuery(
                """
                INSERT INTO sink_dead_letters (tenant, sink_id, idempotency_key, body, changes, status, response, failed_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [
                    .text(sink.tenant), .text(sink.id), .text(letter.idempotencyKey), .text(letter.body), .integer(Int64(letter.changes)),
                    .integer(Int64(letter.status)), .text(SinkRequest.category(status: letter.status)), .integer(letter.failedAt),
                ])
            return true
        }
    }

    /// Forgets a dead letter (replayed); `false` when it was gone.
    package func removeDeadLetter(tenant: String, sinkID: String, id: Int64) async throws -> Bool {
        try await storage.write { transaction in
            try await !transaction.serverTableQuery(
                "DELETE FROM sink_dead_letters WHERE tenant = ? AND sink_id = ? AND id = ? RETURNING id",
                [.text(tenant), .text(sinkID), .integer(id)]
            ).isEmpty
        }
    }

    /// Records a replay's refusal on its dead letter.
    package func refusedAgain(tenant: String, sinkID: String, id: Int64, status: Int, at now: Int64) async throws {
        _ = try await storage.write { transaction in
            try await transaction.serverTableQuery(
                "UPDATE sink_dead_letters SET status = ?, response = ?, failed_at = ? WHERE tenant = ? AND sink_id = ? AND id = ? RETURNING id",
                [
                    .integer(Int64(status)), .text(SinkRequest.category(status: status)), .integer(now), .text(tenant), .text(sinkID),
                    .integer(id),
                ])
        }
    }

    private func update(_ sink: Sink, holder: String, set assignments: String, _ arguments: [ColumnValue]) async throws -> Bool {
        try await storage.write { transaction in
            try await !transaction.serverTableQuery(
                "UPDATE sinks SET \(assignments) WHERE tenant = ? AND id = ? AND lease_holder = ? RETURNING id",
                arguments + [.text(sink.tenant), .text(sink.id), .text(holder)]
            ).isEmpty
        }
    }

    // MARK: Rows

    private static func sink(_ row: StoredRow, key: AuditKey) -> Sink {
        let (tenant, id) = (row.text("tenant") ?? "", row.text("id") ?? "")
        // A sink sealed under another audit key is still listed (and can be removed); it is not
        // delivered, and the others go on.
        let secrets = try? unseal(row.text("sealed_secret") ?? "", tenant: tenant, id: id, key: key)
        let pending = row.text("pending_until").flatMap(ChangeFeed.Cursor.init(text:)).flatMap { until in
            row.text("pending_key").map { Sink.Pending(until: until, key: $0) }
        }
        return Sink(
            tenant: tenant, id: id, kind: row.text("kind") ?? "webhook", url: row.text("url") ?? "",
            contracts: row.text("contracts").map { $0.split(separator: ",").map(String.init) },
            secrets: secrets ?? Sink.Secrets(signing: ""),
            options: options(row.text("options")),
            createdAt: row.integer("created_at") ?? 0,
            cursor: row.text("cursor").flatMap(ChangeFeed.Cursor.init(text:)) ?? ChangeFeed.Cursor(entry: 1, passed: 0), pending: pending,
            attempts: Int(row.integer("attempts") ?? 0), nextAttemptAt: row.integer("next_attempt_at") ?? 0, lastError: row.text("last_error"),
            delivered: row.integer("delivered") ?? 0, deliveredAt: row.integer("delivered_at"), leaseHolder: row.text("lease_holder"),
            leaseUntil: row.integer("lease_until") ?? 0,
            secretsReadable: secrets != nil
        )
    }

    /// A sink's settings from its `options` column: a JSON object of strings. Rows written before
    /// sink kinds were open held this store's own `Options` record, two of whose keys were camel
    /// case; they read as the names those settings have now. Any other name is an app's kind's
    /// own and is read as it was written.
    static func options(_ text: String?) -> [String: String] {
        guard let text, let decoded = try? JSONDecoder().decode([String: String?].self, from: Data(text.utf8)) else { return [:] }
        var options: [String: String] = [:]
        for (name, value) in decoded {
            guard let value else { continue }
            options[legacyOptionNames[name] ?? name] = value
        }
        return options
    }

    /// The camel-case keys of the `options` record stored before sink kinds were open.
    private static let legacyOptionNames = ["homePage": "home_page", "activityBase": "activity_base"]

    private static func deadLetter(_ row: StoredRow) -> DeadLetter {
        DeadLetter(
            id: row.integer("id") ?? 0, sinkID: row.text("sink_id") ?? "", idempotencyKey: row.text("idempotency_key") ?? "",
            body: row.text("body") ?? "", changes: Int(row.integer("changes") ?? 0), status: Int(row.integer("status") ?? 0),
            failedAt: row.integer("failed_at") ?? 0
        )
    }

    // MARK: Secrets at rest

    /// A sink's secrets sealed with AES-GCM under a key derived from the audit key, bound to the
    /// sink: a dump of the database alone cannot sign a batch.
    /// Sealed as one JSON object: `signing` and the kind's secret settings beside it (a row
    /// written before sink kinds were open holds `signing` and an LRS's `password`, which is the
    /// `xapi` kind's secret setting of that name).
    static func seal(_ secrets: Sink.Secrets, tenant: String, id: String, key: AuditKey) throws -> String {
        var object = secrets.settings
        object["signing"] = secrets.signing
        let plain = try JSONEncoder.sorted.encode(object)
        let box = try AES.GCM.seal(plain, using: key.sinkSecretKey, authenticating: Data("\(tenant)\u{0}\(id)".utf8))
        guard let combined = box.combined else { throw SinkStoreError.unsealable(sink: id) }
        return combined.base64EncodedString()
    }

    static func unseal(_ sealed: String, tenant: String, id: String, key: AuditKey) throws -> Sink.Secrets {
        guard let combined = Data(base64Encoded: sealed), let box = try? AES.GCM.SealedBox(combined: combined),
            let plain = try? AES.GCM.open(box, using: key.sinkSecretKey, authenticating: Data("\(tenant)\u{0}\(id)".utf8)),
            var object = try? JSONDecoder().decode([String: String?].self, from: plain), let signing = object.removeValue(forKey: "signing") ?? nil
        else { throw SinkStoreError.unsealable(sink: id) }
        return Sink.Secrets(signing: signing, settings: object.compactMapValues { $0 })
    }
}

/// Why a sink could not be read.
package enum SinkStoreError: Error, CustomStringConvertible {
    /// Its secrets do not open with this server's audit key (another key, or a damaged row).
    case unsealable(sink: String)

    package var description: String {
        switch self {
        case .unsealable(let sink):
            "the secrets of sink \(sink) do not open with this server's audit key (was it added under another key?)"
        }
    }
}

extension JSONEncoder {
    /// Keys sorted: the same value always encodes to the same text.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

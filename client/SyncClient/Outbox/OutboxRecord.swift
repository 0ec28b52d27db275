import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

/// An outbox row as stored.
struct OutboxRecord {
    var seq: Int64
    var clientMutationId: String
    var entity: String
    var op: MutationOperation
    var rowId: String
    var payload: Data
    var hmac: Data
    var status: OutboxStatus
    var pushSeq: Int64?
    var attempts: Int
    var nextAttemptAt: Int64?
    var lastError: String?
    var baseVersion: Int64?
    var hlc: String?
    var occurredAt: Int64?
    var hash: String?
    var schemaVersion: Int
    var createdAt: Int64
    var updatedAt: Int64

    /// `nil` when the row's `op` or `status` is not one this build knows (tampering).
    init?(row: Row) {
        guard let op = MutationOperation(rawValue: row["op"] ?? ""), let status = OutboxStatus(rawValue: row["status"] ?? "") else {
            return nil
        }
        seq = row["seq"]
        clientMutationId = row["client_mutation_id"]
        entity = row["entity"]
        self.op = op
        rowId = row["row_id"]
        payload = row["payload"] ?? Data()
        hmac = row["hmac"] ?? Data()
        self.status = status
        pushSeq = row["push_seq"]
        attempts = row["attempts"]
        nextAttemptAt = row["next_attempt_at"]
        lastError = row["last_error"]
        baseVersion = row["base_version"]
        hlc = row["hlc"]
        occurredAt = row["occurred_at"]
        hash = row["hash"]
        schemaVersion = row["schema_version"]
        createdAt = row["created_at"]
        updatedAt = row["updated_at"]
    }

    /// What the HMAC covers: everything that says what the write is (not its delivery state).
    static func macFields(
        seq: Int64, clientMutationId: String, entity: String, op: String, rowId: String, schemaVersion: Int,
        baseVersion: Int64?, hlc: String?, occurredAt: Int64?, hash: String?, payload: Data
    ) -> [Data] {
        [
            Data("outpost.outbox.v1".utf8), Data(String(seq).utf8), Data(clientMutationId.utf8), Data(entity.utf8),
            Data(op.utf8), Data(rowId.utf8), Data(String(schemaVersion).utf8), Data((baseVersion.map(String.init) ?? "").utf8),
            Data((hlc ?? "").utf8), Data((occurredAt.map(String.init) ?? "").utf8), Data((hash ?? "").utf8), payload,
        ]
    }

    var macFields: [Data] {
        Self.macFields(
            seq: seq, clientMutationId: clientMutationId, entity: entity, op: op.rawValue, rowId: rowId,
            schemaVersion: schemaVersion, baseVersion: baseVersion, hlc: hlc, occurredAt: occurredAt, hash: hash,
            payload: payload
        )
    }

    static func sealContext(_ clientMutationId: String) -> String { "outbox\u{0}" + clientMutationId }

    var entry: OutboxEntry {
        OutboxEntry(
            seq: seq, clientMutationId: clientMutationId, entity: entity, op: op, rowId: rowId, status: status, pushSeq: pushSeq,
            attempts: attempts, nextAttemptAt: nextAttemptAt.map { Timestamp(millisecondsSince1970: $0).date },
            lastError: lastError.flatMap { try? JSONDecoder().decode(ErrorDetail.self, from: Data($0.utf8)) },
            baseVersion: baseVersion, hlc: hlc, schemaVersion: schemaVersion,
            createdAt: Timestamp(millisecondsSince1970: createdAt).date, updatedAt: Timestamp(millisecondsSince1970: updatedAt).date
        )
    }
}

/// The sealed part of an outbox entry: the payload that goes on the wire and the values the
/// changed fields had before (sent for patches; kept for every write so a failed write can be
/// reverted when discarded).
struct OutboxContent: Hashable {
    var payload: JSONValue?
    var base: [String: JSONValue]?
    /// The device's signature of the write (a contract with `signed: true`), made when it was
    /// queued; sealed and covered by the entry's MAC with the rest.
    var signature: String?

    var json: JSONValue {
        var members: [String: JSONValue] = ["payload": payload ?? .null, "base": base.map(JSONValue.object) ?? .null]
        // Left out when absent: entries written before signatures keep their sealed text.
        if let signature { members["signature"] = .string(signature) }
        return .object(members)
    }

    init(payload: JSONValue?, base: [String: JSONValue]?, signature: String? = nil) {
        self.payload = payload
        self.base = base
        self.signature = signature
    }

    init?(json: JSONValue) {
        guard case .object(let fields) = json else { return nil }
        payload = fields["payload"].flatMap { $0 == .null ? nil : $0 }
        switch fields["base"] {
        case .object(let base)?: self.base = base
        default: base = nil
        }
        if case .string(let text)? = fields["signature"] { signature = text } else { signature = nil }
    }
}

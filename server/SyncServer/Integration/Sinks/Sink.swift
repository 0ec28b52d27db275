package import ContractRuntime
import Foundation
import SyncProtocol

/// A destination the server delivers a tenant's applied changes to, at least once and in
/// commit order, from its place in the change feed (``SinkDelivery``).
///
/// A sink never re-reads what it acknowledged: its ``cursor`` moves only when the receiver
/// answered 2xx (or when a refused batch was parked as a dead letter), in the same statement
/// that clears the batch in flight, so a crash at any point sends the batch in flight again,
/// with the same ``Pending/key``.
package struct Sink: Sendable {
    package var tenant: String
    package var id: String
    /// The name of its ``SinkKind``.
    package var kind: String
    /// The URL it was added with (its kind may post elsewhere under it:
    /// ``SinkKind/destination(of:settings:)``).
    package var url: String
    /// The contracts delivered; every contract when `nil`.
    package var contracts: [String]?
    /// What signs the batches (HMAC-SHA256) and its kind's secret settings; sealed at rest.
    package var secrets: Secrets
    /// Its kind's settings that are not secret.
    package var options: [String: String]
    package var createdAt: Int64
    /// The first change not delivered yet.
    package var cursor: ChangeFeed.Cursor
    /// The batch being delivered, if one is.
    package var pending: Pending?
    /// Failed deliveries of the batch in flight.
    package var attempts: Int
    /// When the batch in flight may be sent again (milliseconds since 1970; 0: now).
    package var nextAttemptAt: Int64
    package var lastError: String?
    /// Changes acknowledged by the receiver since the sink was added.
    package var delivered: Int64
    package var deliveredAt: Int64?
    package var leaseHolder: String?
    package var leaseUntil: Int64
    /// Whether its secrets open with this server's audit key; a sink added under another key
    /// is not delivered until it is added again.
    package var secretsReadable = true

    /// The batch in flight: the feed up to `until` (exclusive), under one idempotency key.
    package struct Pending: Sendable, Equatable {
        package var until: ChangeFeed.Cursor
        package var key: String
    }

    package struct Secrets: Sendable, Equatable {
        /// The HMAC-SHA256 key of `Outpost-Signature`.
        package var signing: String
        /// Its kind's secret settings (``SinkSettings/secrets``).
        package var settings: [String: String]

        package init(signing: String, settings: [String: String] = [:]) {
            self.signing = signing
            self.settings = settings
        }
    }

    /// Its kind's view of its settings.
    package var settings: SinkSettings { SinkSettings(values: options, secrets: secrets.settings, contracts: contracts) }

    /// The sink as the admin routes and `sinks list` show it: everything but its secrets.
    package var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(id), "kind": .string(kind), "url": .string(url),
            "contracts": contracts.map { .array($0.map(JSONValue.string)) } ?? .null,
            "created_at": .string(Timestamp(millisecondsSince1970: createdAt).iso8601), "cursor": .string(cursor.text),
            "delivered": .int(delivered), "attempts": .int(Int64(attempts)),
            "in_flight": .bool(pending != nil),
        ]
        if let deliveredAt { object["delivered_at"] = .string(Timestamp(millisecondsSince1970: deliveredAt).iso8601) }
        if let lastError { object["last_error"] = .string(lastError) }
        if !secretsReadable {
            object["last_error"] = .string("its secrets do not open with this server's audit key: remove it and add it again")
        }
        if nextAttemptAt > 0 { object["next_attempt_at"] = .string(Timestamp(millisecondsSince1970: nextAttemptAt).iso8601) }
        // Its kind's settings, under the kind's name, as they were given (secrets left out).
        if !options.isEmpty { object[kind] = .object(options.mapValues(JSONValue.string)) }
        return .object(object)
    }
}

/// A batch a sink's receiver refused with a 4xx: kept with its idempotency key for an operator
/// to read and replay.
package struct DeadLetter: Sendable {
    package var id: Int64
    package var sinkID: String
    package var idempotencyKey: String
    /// The request body as it was sent.
    package var body: String
    package var changes: Int
    /// The receiver's status. Nothing else of its answer is kept (rows stored before kept its
    /// start in the `response` column; it is never shown).
    package var status: Int
    package var failedAt: Int64

    /// The letter as the admin routes and `sinks dead-letters` show it: `response` is the fixed
    /// category of the receiver's status (`receiver_status 404`), never the receiver's words.
    package var json: JSONValue {
        .object([
            "id": .int(id), "sink": .string(sinkID), "idempotency_key": .string(idempotencyKey), "changes": .int(Int64(changes)),
            "status": .int(Int64(status)), "response": .string(SinkRequest.category(status: status)),
            "failed_at": .string(Timestamp(millisecondsSince1970: failedAt).iso8601),
        ])
    }
}

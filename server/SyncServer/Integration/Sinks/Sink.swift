package import ContractRuntime
import Foundation
import SyncProtocol

/// Where a sink delivers the change feed.
package enum SinkKind: String, Sendable, CaseIterable {
    /// JSON batches of changes, signed, POSTed to a URL (``WebhookBatch``).
    case webhook
    /// xAPI 1.0.3 statements made of a contract's rows, POSTed to a learning record store's
    /// `statements` resource (``XAPIStatements``).
    case xapi
}

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
    package var kind: SinkKind
    /// A webhook's URL; an LRS's xAPI endpoint (statements go to `<url>/statements`).
    package var url: String
    /// The contracts delivered; every contract when `nil`.
    package var contracts: [String]?
    /// What signs the batches (HMAC-SHA256) and, for an LRS, its password; sealed at rest.
    package var secrets: Secrets
    /// What is not secret: an LRS's user and the xAPI mapping's settings.
    package var options: Options
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

    package struct Secrets: Sendable, Codable, Equatable {
        /// The HMAC-SHA256 key of `Outpost-Signature`.
        package var signing: String
        /// An LRS's Basic password.
        package var password: String?

        package init(signing: String, password: String? = nil) {
            self.signing = signing
            self.password = password
        }
    }

    package struct Options: Sendable, Codable, Equatable {
        /// An LRS's Basic user.
        package var user: String?
        /// The contract whose rows become statements (xAPI).
        package var contract: String?
        /// The `homePage` of the actors' accounts (xAPI): the system users' ids belong to.
        package var homePage: String?
        /// Where activity IRIs start (xAPI): an object id `lesson-1` is `<activityBase>lesson-1`.
        package var activityBase: String?

        package init(user: String? = nil, contract: String? = nil, homePage: String? = nil, activityBase: String? = nil) {
            self.user = user
            self.contract = contract
            self.homePage = homePage
            self.activityBase = activityBase
        }
    }

    /// Where its batches are POSTed: the URL of a webhook, an LRS's `statements` resource.
    package var requestURL: String {
        guard kind == .xapi else { return url }
        return (url.hasSuffix("/") ? String(url.dropLast()) : url) + "/statements"
    }

    /// The sink as the admin routes and `sinks list` show it: everything but its secrets.
    package var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(id), "kind": .string(kind.rawValue), "url": .string(url),
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
        if kind == .xapi {
            object["xapi"] = .object([
                "contract": options.contract.map(JSONValue.string) ?? .null, "user": options.user.map(JSONValue.string) ?? .null,
                "home_page": options.homePage.map(JSONValue.string) ?? .null,
                "activity_base": options.activityBase.map(JSONValue.string) ?? .null,
            ])
        }
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

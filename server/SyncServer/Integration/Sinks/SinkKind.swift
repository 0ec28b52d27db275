public import ContractRuntime
public import Foundation
import SyncProtocol

/// A kind of sink: what a sink of it is configured with, and what the requests of its batches
/// carry. The engine delivers every kind alike (at least once, in commit order, signed with
/// `Outpost-Signature`, retried with backoff, refused batches parked as dead letters); a kind
/// says only where a batch goes and what it says.
///
/// The engine has ``WebhookSinkKind``; an app adds its own with ``ServerApp/sinkKinds`` (the
/// learning app's `xapi` turns its statement rows into xAPI statements for a learning record
/// store). An operator picks one by ``name``: `POST /admin/v1/sinks {"kind": name, name:
/// {settings}}`, or `sync-server sinks add --kind name --setting key=value`.
///
/// ```swift
/// struct AuditTrailSinkKind: SinkKind {
///     var name: String { "audit-trail" }
///     func configure(_ settings: [String: String], contracts: [String]?, catalog: ContractCatalog) throws(SinkSettingsError) -> SinkSettings {
///         guard let token = settings["token"] else { throw SinkSettingsError("an audit-trail sink needs its `token`") }
///         return SinkSettings(secrets: ["token": token], contracts: contracts)
///     }
///     func headers(of settings: SinkSettings) -> [(name: String, value: String)] {
///         [("Authorization", "Bearer \(settings.secrets["token"] ?? "")")]
///     }
///     func body(for batch: SinkBatch) -> Data? { try? JSONEncoder().encode(batch.changes) }
/// }
/// ```
public protocol SinkKind: Sendable {
    /// The name sinks of this kind are added with: 1 to 32 lowercase ASCII letters, digits and
    /// `-`, unique among the server's kinds.
    var name: String { get }

    /// Checks a new sink's settings (strings by name, as the operator gave them) against the
    /// server's contracts and answers what the sink keeps: its settings, the secret ones apart
    /// (sealed at rest, never shown), and the contracts it receives. `contracts` is the
    /// operator's choice of contracts (`nil`: every one), already checked to be the server's.
    ///
    /// - Throws: ``SinkSettingsError`` for a setting missing, unknown or wrong; the operator
    ///   gets its message with a 400.
    func configure(_ settings: [String: String], contracts: [String]?, catalog: ContractCatalog) throws(SinkSettingsError) -> SinkSettings

    /// Where a sink's batches are POSTed, given the URL it was added with. The URL as it is, by
    /// default.
    func destination(of url: String, settings: SinkSettings) -> String

    /// The kind's own headers of a sink's requests (credentials, a protocol version). The engine
    /// adds `Content-Type: application/json`, `Idempotency-Key`, `Outpost-Sink`, `User-Agent` and
    /// `Outpost-Signature` to every request. None by default.
    func headers(of settings: SinkSettings) -> [(name: String, value: String)]

    /// The body of a batch's request, or `nil` when nothing of the batch is for the receiver
    /// (the sink then moves past it without a request).
    func body(for batch: SinkBatch) -> Data?
}

extension SinkKind {
    /// The URL the sink was added with, as it is.
    public func destination(of url: String, settings: SinkSettings) -> String { url }

    /// No headers of the kind's own.
    public func headers(of settings: SinkSettings) -> [(name: String, value: String)] { [] }
}

/// What a sink keeps of its settings (``SinkKind/configure(_:contracts:catalog:)``).
public struct SinkSettings: Sendable, Hashable {
    /// Settings shown where the sink is listed (`GET /admin/v1/sinks`, `sinks list`, the console).
    public var values: [String: String]
    /// Settings sealed at rest with the sink's signing secret and never shown: passwords, tokens.
    public var secrets: [String: String]
    /// The contracts whose changes the sink receives; `nil` for every contract.
    public var contracts: [String]?

    /// Settings of `values`, `secrets`, receiving `contracts` (`nil`: every contract).
    public init(values: [String: String] = [:], secrets: [String: String] = [:], contracts: [String]?) {
        self.values = values
        self.secrets = secrets
        self.contracts = contracts
    }
}

/// One batch of a sink's changes, in commit order, for ``SinkKind/body(for:)``.
public struct SinkBatch: Sendable {
    /// The sink's id.
    public var sinkID: String
    /// The tenant whose changes these are.
    public var tenant: String
    /// The key the batch is sent under, each time it is sent (`Idempotency-Key`).
    public var idempotencyKey: String
    /// The changes, as the change feed gives them (`GET /admin/v1/changes`, docs/integration.md):
    /// objects with `cursor`, `kind`, `contract`, `operation`, `id`, `row`, `user_id`, `recorded_at`.
    public var changes: [JSONValue]
    /// The sink's settings.
    public var settings: SinkSettings

    /// A batch of `changes` of `tenant` for the sink `sinkID`.
    public init(sinkID: String, tenant: String, idempotencyKey: String, changes: [JSONValue], settings: SinkSettings) {
        self.sinkID = sinkID
        self.tenant = tenant
        self.idempotencyKey = idempotencyKey
        self.changes = changes
        self.settings = settings
    }
}

/// Why a sink's settings were refused, for the operator (a 400 `malformed`, or `sinks add`'s error).
public struct SinkSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong and what to give instead.
    public var message: String
    /// Whether the settings name a contract the server does not have (a 400 `unknown_entity`).
    public var isUnknownContract: Bool

    /// A refusal saying `message`.
    public init(_ message: String, isUnknownContract: Bool = false) {
        self.message = message
        self.isUnknownContract = isUnknownContract
    }

    /// The message.
    public var description: String { message }
}

/// The engine's own kind, `webhook`: JSON batches of changes POSTed to a URL,
/// `{"sink", "tenant", "idempotency_key", "changes": […]}`. It takes no settings.
public struct WebhookSinkKind: SinkKind {
    /// A webhook kind.
    public init() {}

    /// `webhook`.
    public var name: String { "webhook" }

    /// Refuses any setting: a webhook is its URL, its secret and its contracts alone.
    public func configure(_ settings: [String: String], contracts: [String]?, catalog: ContractCatalog) throws(SinkSettingsError) -> SinkSettings {
        if let unknown = settings.keys.sorted().first { throw SinkSettingsError("a webhook takes no settings, not `\(unknown)`") }
        return SinkSettings(contracts: contracts)
    }

    /// `{"sink", "tenant", "idempotency_key", "changes": […]}`, in canonical JSON.
    public func body(for batch: SinkBatch) -> Data? {
        let body = JSONValue.object([
            "sink": .string(batch.sinkID), "tenant": .string(batch.tenant), "idempotency_key": .string(batch.idempotencyKey),
            "changes": .array(batch.changes),
        ])
        return Data(CanonicalJSON.bytes(body))
    }
}

/// The sink kinds of a server: the engine's webhook and its apps' kinds, by name.
package struct SinkKinds: Sendable {
    private let byName: [String: any SinkKind]

    /// The webhook kind, and each of `apps`' ``ServerApp/sinkKinds``.
    ///
    /// - Precondition: the names are well formed and unique (an app's programming error, caught
    ///   at start).
    package init(apps: [any ServerApp] = []) {
        var byName: [String: any SinkKind] = [:]
        for kind in [WebhookSinkKind()] + apps.flatMap(\.sinkKinds) {
            precondition(Self.isWellFormed(kind.name), "a sink kind's name is 1 to 32 lowercase letters, digits and -, not '\(kind.name)'")
            precondition(byName[kind.name] == nil, "two sink kinds are named '\(kind.name)'")
            byName[kind.name] = kind
        }
        self.byName = byName
    }

    /// The kind named `name`, if the server has it.
    package func kind(named name: String) -> (any SinkKind)? { byName[name] }

    /// Every kind's name, sorted.
    package var names: [String] { byName.keys.sorted() }

    static func isWellFormed(_ name: String) -> Bool {
        (1...32).contains(name.utf8.count) && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
    }
}

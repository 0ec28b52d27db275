public import ContractRuntime
public import Foundation
public import SyncProtocol

/// What a device knows of one of its subscriptions (``SubscriptionHandle/status``,
/// ``OfflineStore/subscriptions()``).
public struct SubscriptionStatus: Sendable, Hashable {
    /// The store's id of the subscription (a ULID).
    public var id: String
    /// What it selects: the subscription's name, its parameters, its scope key.
    public var request: SubscriptionRequest
    /// Pulled with every sync: `false` once ended (its rows stay until ``expiresAt``) or refused
    /// (``error``).
    public var isActive: Bool
    /// Whether a whole sync of it (every page, to `has_more: false`) is on the device.
    public var hasSynced: Bool
    /// When a whole sync of it last ended.
    public var lastSyncedAt: Date?
    /// Rows it holds on the device.
    public var rowCount: Int
    /// The tier it is pulled at.
    public var priority: SyncPriority
    /// How long its rows stay after it ends.
    public var ttl: Duration
    /// When it is deleted and its rows go (unless something else holds them), once ended.
    public var expiresAt: Date?
    /// Why the server refused it (`forbidden`, `subscription_too_broad`, …): it is pulled no
    /// more and holds nothing; ``SubscriptionHandle/waitForFirstSync()`` throws it and deletes it.
    public var error: ErrorDetail?
    /// While its pages come in a sync (the engine's handle says; `nil` otherwise): the rows
    /// stored so far in this pass (`done`; `total` counts the same, the server does not say how
    /// many are left).
    public var progress: SyncProgress?
    /// Why its last pull did not happen or did not end (the network, a transport that cannot pull
    /// subscriptions), as the engine's handle says until one ends; the subscription stays, and
    /// the next sync pulls it again.
    public var lastFailure: ErrorDetail?
    /// When the device subscribed (first, when it subscribed again since).
    public var createdAt: Date
    /// When the app last used what it holds (``SubscriptionHandle/markUsed()``), if ever.
    public var lastUsedAt: Date?
}

/// The device's subscriptions, counted for a sync UI (``SyncStatus/subscriptions``).
public struct SubscriptionCounts: Hashable, Sendable {
    /// Pulled with every sync.
    public var active = 0
    /// Active ones whose first whole sync is not on the device yet.
    public var awaitingFirstSync = 0
    /// Ended ones whose rows stay until their TTL passes.
    public var ended = 0
    /// Refused by the server, until the app reads why (``SubscriptionHandle/waitForFirstSync()``).
    public var refused = 0
    /// Rows the subscriptions hold on the device (a row two of them hold counts once).
    public var rows = 0

    /// Counts of no subscriptions.
    public init() {}
}

/// Why a subscription cannot be made, or was refused.
public enum SubscriptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The contracts declare no subscription by this name.
    case unknownSubscription(name: String, known: [String])
    /// A parameter (or the TTL, or the scope) is missing, not taken, or not of its type.
    case invalidParameter(name: String, reason: String)
    /// The server refused it: the device's identity may not read what it selects. Nothing of it is kept.
    case forbidden(message: String)
    /// The server refused it for another reason (`subscription_too_broad`, …). Nothing of it is kept.
    case refused(code: ErrorCode, message: String)
    /// The transport or the server cannot pull subscriptions
    /// (``SyncTransport/pullSubscriptions(_:schema:clientID:)``); the subscription stays and
    /// syncs once they can.
    case unsupported(message: String)
    /// The store holds no subscription with this id.
    case notFound(id: String)
    /// It was ended before its first sync: it will not sync.
    case ended(id: String)
    /// The store failed.
    case store(String)

    /// What went wrong, for logs and the command-line device.
    public var description: String {
        switch self {
        case .unknownSubscription(let name, let known):
            "the contracts declare no subscription '\(name)'; they declare \(known.isEmpty ? "none" : known.joined(separator: ", "))"
        case .invalidParameter(let name, let reason): "parameter '\(name)': \(reason)"
        case .forbidden(let message): "the server refused the subscription: \(message)"
        case .refused(let code, let message): "the server refused the subscription (\(code)): \(message)"
        case .unsupported(let message): "subscriptions cannot be pulled: \(message)"
        case .notFound(let id): "no subscription '\(id)' on this device"
        case .ended(let id): "the subscription '\(id)' was ended before its first sync"
        case .store(let reason): "the store failed: \(reason)"
        }
    }
}

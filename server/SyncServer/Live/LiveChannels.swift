import ContractRuntime
import Foundation
import Logging
import NIOConcurrencyHelpers
import SyncProtocol

/// How the live channel (`GET /sync/v1/live`) behaves; every value has a default fit for one machine.
public struct LiveChannelConfiguration: Sendable, Hashable {
    /// How often a channel with nothing to say writes a heartbeat (15 s). A device that
    /// hears nothing for 2.5 heartbeats reconnects; the server closes a connection whose
    /// heartbeats go unacknowledged by the peer's TCP that long (Linux).
    public var heartbeat: Duration
    /// Channels one device may hold open at once (2).
    public var connectionsPerDevice: Int
    /// Channels this process holds at most (10 000); each costs a file descriptor.
    public var maximumConnections: Int
    /// How often a channel's token is checked again against revocations, erasures and team
    /// memberships (60 s).
    public var revalidationInterval: Duration

    /// Settings with the given heartbeat, limits and revalidation interval; the defaults are the server's.
    public init(
        heartbeat: Duration = .seconds(15), connectionsPerDevice: Int = 2, maximumConnections: Int = 10_000,
        revalidationInterval: Duration = .seconds(60)
    ) {
        self.heartbeat = heartbeat
        self.connectionsPerDevice = max(1, connectionsPerDevice)
        self.maximumConnections = max(0, maximumConnections)
        self.revalidationInterval = revalidationInterval
    }
}

/// The live channels (`GET /sync/v1/live`) open on this process, and who hears of which commit.
///
/// Each channel is registered under every scope key its token may read, so a commit reaches
/// exactly the devices that could pull it, found by one dictionary lookup per moved scope: the
/// cost of a commit does not grow with the number of devices connected elsewhere. What a device
/// may read is read again every ``LiveChannelConfiguration/revalidationInterval`` (its teams may change; a
/// revoked device or an erased user is closed).
///
/// Limits: at most ``LiveChannelConfiguration/connectionsPerDevice`` channels per device (one more closes
/// its oldest, which is most often the dead connection of a device that changed networks) and
/// ``LiveChannelConfiguration/maximumConnections`` in all (one more is refused, 503 `live_capacity`).
package final class LiveChannels: Sendable {
    private struct ScopeAddress: Hashable {
        var tenant: String
        var key: String
    }

    private struct DeviceAddress: Hashable {
        var tenant: String
        var userID: String
        var deviceID: String
    }

    private struct Registry {
        var byScope: [ScopeAddress: [ObjectIdentifier: LiveConnection]] = [:]
        /// Admin channels hear every scope of their tenant.
        var byTenant: [String: [ObjectIdentifier: LiveConnection]] = [:]
        var byDevice: [DeviceAddress: [LiveConnection]] = [:]
        var readable: [ObjectIdentifier: Set<String>] = [:]
        var count = 0
    }

    let configuration: LiveChannelConfiguration
    private let registry = NIOLockedValueBox(Registry())
    private let storage: any SyncStorage
    private let clock: any ServerClock
    private let metrics: ServerMetrics

    init(configuration: LiveChannelConfiguration, storage: any ServerStorage, clock: any ServerClock, metrics: ServerMetrics) {
        self.configuration = configuration
        self.storage = storage.engine
        self.clock = clock
        self.metrics = metrics
        self.storage.observeCommits { [weak self] notice in self?.publish(notice) }
    }

    /// Channels open now.
    package var count: Int { registry.withLockedValue { $0.count } }

    /// Every scope key `identity` may read, over every scope of the contracts.
    func readableKeys(_ identity: DeviceIdentity) -> Set<String> {
        Set(storage.contracts.scopes.flatMap { ScopeAccess.readableKeys(in: $0, identity: identity) })
    }

    /// Registers a channel for `identity`, closing the device's oldest one beyond its limit.
    /// - Throws: 503 `live_capacity` when the process holds its maximum already.
    func open(_ identity: DeviceIdentity) throws(ServiceError) -> LiveConnection {
        let connection = LiveConnection(identity: identity)
        let keys = identity.isAdmin ? [] : readableKeys(identity)
        let limit = configuration.connectionsPerDevice
        let replaced: [LiveConnection]? = registry.withLockedValue { registry in
            let device = DeviceAddress(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID)
            let open = registry.byDevice[device, default: []]
            let replaced = open.count >= limit ? Array(open.prefix(open.count - limit + 1)) : []
            guard registry.count - replaced.count < configuration.maximumConnections else { return nil }
            for old in replaced { Self.unregister(old, from: &registry) }
            registry.byDevice[device, default: []].append(connection)
            Self.index(connection, keys: keys, in: &registry)
            registry.count += 1
            return replaced
        }
        guard let replaced else {
            throw ServiceError(
                status: 503, .liveCapacity, "this server holds as many live channels as it keeps; sync on the timer and try again later",
                retryAfter: 30
            )
        }
        for old in replaced { old.close(.replaced) }
        metrics.liveConnections(count)
        return connection
    }

    /// Forgets a channel whose stream ended.
    func remove(_ connection: LiveConnection) {
        let removed = registry.withLockedValue { Self.unregister(connection, from: &$0) }
        if removed { metrics.liveConnections(count) }
    }

    /// Hands a commit's changes to the channels that may read them; on ``CommitNotice/mayHaveMissed``,
    /// tells every channel to look at everything.
    func publish(_ notice: CommitNotice) {
        switch notice {
        case .changed(let changes):
            var delivered = 0
            for change in changes {
                let listeners = registry.withLockedValue { registry in
                    Array((registry.byScope[ScopeAddress(tenant: change.tenant, key: change.scopeKey)] ?? [:]).values)
                        + Array((registry.byTenant[change.tenant] ?? [:]).values)
                }
                for listener in listeners { listener.poke(scope: change.scopeKey, sequence: change.sequence) }
                delivered += listeners.count
            }
            if delivered > 0 { metrics.livePokes(delivered) }
        case .mayHaveMissed:
            for listener in registry.withLockedValue({ $0.byDevice.values.flatMap { $0 } }) { listener.resync() }
        }
    }

    /// Checks a channel's token again as a request would (``AuthenticationMiddleware``): closes it
    /// when its device or user was revoked or the user's data erased since it was issued, and
    /// files it under the scopes its user's current teams open.
    func revalidate(_ connection: LiveConnection) async {
        var identity = connection.identity
        let (tenant, user, device) = (identity.tenant, identity.userID, identity.deviceID)
        guard let state = try? await storage.readOneStatement({ try await $0.identityState(tenant: tenant, userID: user, deviceID: device) }) else {
            // Storage unreachable: keep the channel; the next check or request decides.
            return
        }
        if state.refusal(ofTokenIssuedAt: identity.issuedAt) != nil { return connection.close(.revoked) }
        guard !identity.isAdmin else { return }
        identity.teams = state.teams
        let keys = readableKeys(identity)
        registry.withLockedValue { registry in
            let id = ObjectIdentifier(connection)
            guard let old = registry.readable[id], old != keys else { return }
            for key in old.subtracting(keys) {
                registry.byScope[ScopeAddress(tenant: tenant, key: key)]?[id] = nil
            }
            Self.index(connection, keys: keys, in: &registry)
        }
    }

    /// Whether the channel's token has expired by the server's clock.
    func hasExpired(_ connection: LiveConnection) -> Bool {
        clock.now().millisecondsSince1970 / 1000 >= connection.identity.expiresAt
    }

    private static func index(_ connection: LiveConnection, keys: Set<String>, in registry: inout Registry) {
        let id = ObjectIdentifier(connection)
        let tenant = connection.identity.tenant
        if connection.identity.isAdmin {
            registry.byTenant[tenant, default: [:]][id] = connection
        } else {
            for key in keys { registry.byScope[ScopeAddress(tenant: tenant, key: key), default: [:]][id] = connection }
        }
        registry.readable[id] = keys
    }

    @discardableResult
    private static func unregister(_ connection: LiveConnection, from registry: inout Registry) -> Bool {
        let id = ObjectIdentifier(connection)
        guard let keys = registry.readable.removeValue(forKey: id) else { return false }
        let identity = connection.identity
        for key in keys {
            let address = ScopeAddress(tenant: identity.tenant, key: key)
            registry.byScope[address]?[id] = nil
            if registry.byScope[address]?.isEmpty == true { registry.byScope[address] = nil }
        }
        registry.byTenant[identity.tenant]?[id] = nil
        if registry.byTenant[identity.tenant]?.isEmpty == true { registry.byTenant[identity.tenant] = nil }
        let device = DeviceAddress(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID)
        registry.byDevice[device]?.removeAll { $0 === connection }
        if registry.byDevice[device]?.isEmpty == true { registry.byDevice[device] = nil }
        registry.count -= 1
        return true
    }
}

/// One open live channel: the pokes waiting to be written, coalesced per scope, and a wake-up
/// for the task that writes them.
final class LiveConnection: Sendable {
    let identity: DeviceIdentity

    private struct Pending {
        /// Scope key → the highest sequence heard, in the order first heard.
        var sequences: [String: Int64] = [:]
        var order: [String] = []
        var resync = false
        var heartbeatDue = false
        var closing: LiveCloseReason?
    }

    /// What the writer takes at once.
    struct Batch {
        var events: [LiveEvent] = []
        var heartbeatDue = false
        var closing: LiveCloseReason?
    }

    private let pending = NIOLockedValueBox(Pending())
    /// Wakes the writer; holds at most one wake-up, so pokes arriving while it writes cost nothing more.
    let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(identity: DeviceIdentity) {
        self.identity = identity
        (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func poke(scope: String, sequence: Int64) {
        pending.withLockedValue { pending in
            if let heard = pending.sequences[scope] {
                pending.sequences[scope] = max(heard, sequence)
            } else {
                pending.sequences[scope] = sequence
                pending.order.append(scope)
            }
        }
        wake.yield()
    }

    func resync() {
        pending.withLockedValue { $0.resync = true }
        wake.yield()
    }

    func heartbeatDue() {
        pending.withLockedValue { $0.heartbeatDue = true }
        wake.yield()
    }

    /// Asks the writer to say why and close; the first reason given wins.
    func close(_ reason: LiveCloseReason) {
        pending.withLockedValue { pending in
            if pending.closing == nil { pending.closing = reason }
        }
        wake.yield()
    }

    /// Everything waiting, emptied.
    func take() -> Batch {
        pending.withLockedValue { pending in
            var batch = Batch(heartbeatDue: pending.heartbeatDue, closing: pending.closing)
            if pending.resync { batch.events.append(.resync) }
            batch.events += pending.order.map { LiveEvent.change(scope: $0, sequence: pending.sequences[$0]!) }
            pending = Pending(closing: pending.closing)
            return batch
        }
    }
}

import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Who hears of which commit on the live channel, coalescing, the per-device and per-process
/// limits, and revalidation, on both storages (``LiveChannels`` over a real storage; the HTTP
/// route and the engine are covered in SyncClientTests.LiveSyncTests and MultiProcessTests). On the
/// scopes of the engines' own contracts.
@Suite(.blockingWork) struct LiveChannelTests {
    static func identity(_ user: String, device: String, teams: [String] = ["red"], tenant: String = "acme", issuedAt: Int64? = nil) -> DeviceIdentity
    {
        DeviceIdentity(
            tenant: tenant, userID: user, deviceID: device, teams: teams, expiresAt: Int64(Date().timeIntervalSince1970) + 3600,
            issuedAt: issuedAt ?? Int64(Date().timeIntervalSince1970) - 10
        )
    }

    /// Moves a scope's sequence in one committed write, as any push or publish does.
    static func commit(_ storage: any SyncStorage, tenant: String = "acme", _ scopeKeys: String...) async throws {
        try await storage.write { transaction in
            for key in scopeKeys { _ = try await transaction.nextScopeSequence(tenant: tenant, scopeKey: key) }
        }
    }

    /// The events waiting on `connection`, once something arrived (a PostgreSQL notification comes
    /// back asynchronously).
    static func events(_ connection: LiveConnection, expecting count: Int = 1) async throws -> [LiveEvent] {
        var events: [LiveEvent] = []
        let deadline = Date().addingTimeInterval(30)
        while events.count < count, Date() < deadline {
            events += connection.take().events
            if events.count < count { try await Task.sleep(nanoseconds: 5_000_000) }
        }
        return events
    }

    func channels(_ kind: StorageKind, _ configuration: LiveChannelConfiguration = LiveChannelConfiguration()) async throws -> (
        LiveChannels, any SyncStorage
    ) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID().uuidString)")
        let storage = try await kind.makeStorage(in: folder, contracts: ContractRegistry.self)
        let channels = LiveChannels(configuration: configuration, storage: storage, clock: SystemClock(), metrics: ServerMetrics())
        try await Self.waitUntilListening(channels, storage)
        return (channels, storage)
    }

    /// PostgreSQL hears commits on a connection of its own, opened after the channels start:
    /// commits in a tenant of its own until an admin channel there hears one.
    static func waitUntilListening(_ channels: LiveChannels, _ storage: any SyncStorage) async throws {
        var admin = identity("probe", device: "probe", tenant: "probe")
        admin.isAdmin = true
        let probe = try channels.open(admin)
        defer { channels.remove(probe) }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            try await commit(storage, tenant: "probe", "ready")
            try await Task.sleep(nanoseconds: 20_000_000)
            if probe.take().events.contains(where: { if case .change = $0 { true } else { false } }) { return }
        }
        Issue.record("the storage never heard its own commits")
    }

    @Test("a commit pokes exactly the channels whose token may read the scope", arguments: StorageKind.allCases)
    func pokesOnlyReaders(kind: StorageKind) async throws {
        let (channels, storage) = try await channels(kind)
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        let ben = try channels.open(Self.identity("ben", device: "b-1"))
        let blue = try channels.open(Self.identity("cat", device: "c-1", teams: ["blue"]))
        let otherTenant = try channels.open(Self.identity("ana", device: "a-1", tenant: "globex"))

        try await Self.commit(storage, "workspace:team:red", "workspace:user:ana")
        #expect(
            Set(try await Self.events(ana, expecting: 2)) == [
                .change(scope: "workspace:team:red", sequence: 1), .change(scope: "workspace:user:ana", sequence: 1),
            ])
        #expect(try await Self.events(ben) == [.change(scope: "workspace:team:red", sequence: 1)])
        // A commit after, which they do hear, shows the earlier one did not reach them.
        try await Self.commit(storage, "workspace:team:blue")
        #expect(try await Self.events(blue) == [.change(scope: "workspace:team:blue", sequence: 1)])
        try await Self.commit(storage, tenant: "globex", "workspace:team:red")
        #expect(try await Self.events(otherTenant) == [.change(scope: "workspace:team:red", sequence: 1)])
        #expect(ana.take().events.isEmpty && ben.take().events.isEmpty)
    }

    @Test("pokes waiting to be written are coalesced: one per scope, at the highest sequence, in the order first heard")
    func coalesces() async throws {
        let (channels, storage) = try await channels(.sqlite)
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        for _ in 0..<5 { try await Self.commit(storage, "workspace:team:red") }
        try await Self.commit(storage, "catalog:global")
        try await Self.commit(storage, "workspace:team:red")
        #expect(ana.take().events == [.change(scope: "workspace:team:red", sequence: 6), .change(scope: "catalog:global", sequence: 1)])
        #expect(ana.take().events.isEmpty)
    }

    @Test("PostgreSQL: notifications arrive in commit order, the last at the scope's last sequence")
    func postgresOrder() async throws {
        let (channels, storage) = try await channels(.postgres)
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        for _ in 0..<5 { try await Self.commit(storage, "workspace:team:red") }
        var sequences: [Int64] = []
        let deadline = Date().addingTimeInterval(30)
        while sequences.last != 5, Date() < deadline {
            for case .change("workspace:team:red", let sequence) in ana.take().events { sequences.append(sequence) }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        #expect(sequences.last == 5)
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
    }

    @Test("a gap in what the storage heard tells every channel to pull everything")
    func resync() async throws {
        let (channels, _) = try await channels(.sqlite)
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        channels.publish(.mayHaveMissed)
        #expect(ana.take().events == [.resync])
    }

    @Test("a rolled-back write pokes no one", arguments: StorageKind.allCases)
    func rollbackIsSilent(kind: StorageKind) async throws {
        let (channels, storage) = try await channels(kind)
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await storage.write { transaction in
                _ = try await transaction.nextScopeSequence(tenant: "acme", scopeKey: "workspace:team:red")
                throw Abort()
            }
        }
        try await Self.commit(storage, "catalog:global")
        #expect(try await Self.events(ana) == [.change(scope: "catalog:global", sequence: 1)])
    }

    @Test("a device's third channel closes its oldest; a process holds its maximum and refuses more with 503")
    func limits() async throws {
        let (channels, _) = try await channels(.sqlite, LiveChannelConfiguration(connectionsPerDevice: 2, maximumConnections: 3))
        let first = try channels.open(Self.identity("ana", device: "a-1"))
        let second = try channels.open(Self.identity("ana", device: "a-1"))
        let third = try channels.open(Self.identity("ana", device: "a-1"))
        #expect(first.take().closing == .replaced)
        #expect(second.take().closing == nil && third.take().closing == nil)
        #expect(channels.count == 2)
        _ = try channels.open(Self.identity("ben", device: "b-1"))
        #expect(channels.count == 3)
        let refusal = #expect(throws: ServiceError.self) { try channels.open(Self.identity("cat", device: "c-1")) }
        #expect(refusal?.status == 503 && refusal?.detail.code == .liveCapacity && refusal?.retryAfter != nil)
        // The same device at its limit replaces its oldest even when the process is full.
        let fourth = try channels.open(Self.identity("ana", device: "a-1"))
        #expect(second.take().closing == .replaced && fourth.take().closing == nil)
        channels.remove(third)
        channels.remove(fourth)
        #expect(channels.count == 1)
    }

    @Test("revalidation closes a revoked device's channel and follows its user's teams", arguments: StorageKind.allCases)
    func revalidation(kind: StorageKind) async throws {
        let (channels, storage) = try await channels(kind)
        _ = try await storage.write { try await $0.setTeamMembership(tenant: "acme", team: "red", userID: "ana", isMember: true) }
        let ana = try channels.open(Self.identity("ana", device: "a-1"))
        let ben = try channels.open(Self.identity("ben", device: "b-1"))

        // Ana leaves red and joins blue: after the check she hears blue, not red.
        try await storage.write { transaction in
            try await transaction.setTeamMembership(tenant: "acme", team: "red", userID: "ana", isMember: false)
            try await transaction.setTeamMembership(tenant: "acme", team: "blue", userID: "ana", isMember: true)
        }
        await channels.revalidate(ana)
        _ = ana.take()
        try await Self.commit(storage, "workspace:team:red")
        try await Self.commit(storage, "workspace:team:blue")
        #expect(try await Self.events(ana) == [.change(scope: "workspace:team:blue", sequence: 1)])

        // Ben's device is revoked: its channel closes at the check.
        let now = Int64(Date().timeIntervalSince1970)
        try await storage.write { try await $0.revoke(tenant: "acme", kind: .device, subject: "b-1", at: now) }
        await channels.revalidate(ben)
        #expect(ben.take().closing == .revoked)
    }

    @Test("an expired token is seen as expired by the server's clock")
    func expiry() async throws {
        let (channels, _) = try await channels(.sqlite)
        var identity = Self.identity("ana", device: "a-1")
        identity.expiresAt = Int64(Date().timeIntervalSince1970) - 1
        let expired = try channels.open(identity)
        #expect(channels.hasExpired(expired))
        #expect(!channels.hasExpired(try channels.open(Self.identity("ben", device: "b-1"))))
    }

    @Test("the wire form of commit notifications: several payloads under PostgreSQL's limit, read back whole")
    func notificationPayloads() {
        let changes = (0..<500).map { ScopeChange(tenant: "acme", scopeKey: "workspace:user:member-\($0)", sequence: Int64($0) * 7) }
        let payloads = CommitNotification.payloads(changes)
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= CommitNotification.maximumPayloadBytes })
        #expect(payloads.flatMap(CommitNotification.changes(in:)) == changes)
        #expect(CommitNotification.changes(in: "not json").isEmpty)
        #expect(CommitNotification.payloads([ScopeChange(tenant: "acme", scopeKey: String(repeating: "k", count: 9000), sequence: 1)]).isEmpty)
    }

    @Test("PostgreSQL: a commit through one storage reaches the channels of another on the same database")
    func acrossProcesses() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID().uuidString)")
        let storages = try await StorageKind.postgres.makeSharedStorages(2, in: folder, contracts: ContractRegistry.self)
        let listening = LiveChannels(configuration: LiveChannelConfiguration(), storage: storages[1], clock: SystemClock(), metrics: ServerMetrics())
        try await Self.waitUntilListening(listening, storages[1])
        let ana = try listening.open(Self.identity("ana", device: "a-1"))
        try await Self.commit(storages[0], "workspace:team:red")
        #expect(try await Self.events(ana) == [.change(scope: "workspace:team:red", sequence: 1)])
    }
}

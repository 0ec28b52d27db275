import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Two storages on one database, as two server processes open it (for SQLite, two connection
/// pools on one file): what one process does while the other's transaction is still open. On the
/// engines' own contracts (`Card`, version_check in a team's scope).
@Suite("Conformance: two processes on one database")
struct ConcurrencyTests {
    static let devices = (
        phone: DeviceIdentity(tenant: PushHarness.tenant, userID: "alice", deviceID: "alice-phone", teams: ["red"], expiresAt: .max),
        tablet: DeviceIdentity(tenant: PushHarness.tenant, userID: "bob", deviceID: "bob-tablet", teams: ["red"], expiresAt: .max)
    )

    static func cardCreates(_ ids: ClosedRange<Int>, prefix: String, harness h: PushHarness) -> [Mutation] {
        ids.map { index in
            h.mutation(Int64(index - ids.lowerBound + 1), "Card", .create, "\(prefix)-\(index)", h.cardPayload("\(prefix)-\(index)"))
        }
    }

    /// Two "processes" on one fresh database: the first's write transactions stop before their
    /// commit until `release` opens (`reached` opens when one got there).
    struct TwoProcesses {
        let kind: StorageKind
        let storages: [any SyncStorage]
        let probe: PostgresProbe?
        let reached = Gate(), release = Gate()

        init(_ kind: StorageKind, folder: URL) async throws {
            let schema = StorageKind.uniqueSchema()
            self.kind = kind
            storages = try await kind.makeSharedStorages(
                2, in: folder.appendingPathComponent("shared"), schema: schema, contracts: ContractRegistry.self)
            probe = kind == .postgres ? try PostgresProbe(schema: schema) : nil
        }

        var heldPush: PushService {
            PushService(
                storage: GatedStorage(base: storages[0], reached: reached, release: release), clock: PushFixedClock(),
                reducers: [])
        }
        var otherPush: PushService { PushService(storage: storages[1], clock: PushFixedClock(), reducers: []) }

        /// Waits until the second process is blocked behind the first (PostgreSQL: its backend
        /// waits for a lock; SQLite: the database is locked, so it simply has not finished yet).
        func waitUntilBlocked(_ comment: Comment) async throws {
            switch kind {
            case .sqlite: try await Task.sleep(for: .milliseconds(300))
            case .postgres: try await probe!.waitForLockWaiters(1, comment)
            }
        }
    }

    @Test("a push resent to a second process while the first still works on it is applied once", arguments: StorageKind.allCases)
    func resendWhileInFlight(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let processes = try await TwoProcesses(kind, folder: h.folder)
        let storages = processes.storages
        let first = processes.heldPush, second = processes.otherPush
        let request = PushRequest(clientId: "alice-phone", schema: [:], mutations: Self.cardCreates(1...40, prefix: "card", harness: h))

        // The first process has applied everything but not committed when the resend arrives.
        let firstAnswer = Task { try await first.push(request, identity: Self.devices.phone) }
        await processes.reached.wait()
        let secondAnswer = Task { try await second.push(request, identity: Self.devices.phone) }
        try await processes.waitUntilBlocked("the resend waits for the first push")
        processes.release.open()
        let one = try await firstAnswer.value
        let two = try await secondAnswer.value

        #expect(one.results.map(\.status) == Array(repeating: .applied, count: 40))
        #expect(two == one, "the resend is answered from the stored results")
        let audit = try await storages[1].read { try await $0.auditEntries(after: 0, limit: 1000) }
        #expect(audit.map(\.rowID) == ["alice-phone:1-40"], "one entry, for the push done once")
        #expect(try await AuditChain.verify(storages[1]) == .intact(entries: 1, keyedFrom: 1))
        let sequence = try await storages[1].read { try await $0.scopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") }
        #expect(sequence == 40)
        let versions = try await storages[1].read { reader in
            try await reader.rows(in: ContractTable(Card.descriptor), tenant: PushHarness.tenant, where: [:], limit: 100).map {
                $0.integer("_version")
            }
        }
        #expect(versions == Array(repeating: 1, count: 40))
    }

    @Test(
        "a pull never skips a row that commits after a row with a higher sequence was read",
        arguments: StorageKind.allCases
    )
    func cursorUnderConcurrentCommits(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let processes = try await TwoProcesses(kind, folder: h.folder)
        let slow = processes.heldPush, fast = processes.otherPush
        let pull = PullService(storage: processes.storages[1])
        let slowPush = PushRequest(clientId: "alice-phone", schema: [:], mutations: Self.cardCreates(1...3, prefix: "slow", harness: h))
        let fastPush = PushRequest(clientId: "bob-tablet", schema: [:], mutations: Self.cardCreates(1...3, prefix: "fast", harness: h))

        // Connection 1 takes the scope's sequence numbers 1…3 and holds its transaction open;
        // connection 2 pushes into the same scope meanwhile, and a device pulls.
        let slowAnswer = Task { try await slow.push(slowPush, identity: Self.devices.phone) }
        await processes.reached.wait()
        let fastAnswer = Task { try await fast.push(fastPush, identity: Self.devices.tablet) }
        try await processes.waitUntilBlocked("the second writer of the scope waits for the first")
        var seen: [String] = []
        let during = try await pull.pull(
            scope: "team", cursor: nil, limit: 100, schema: [:], clientID: nil, identity: Self.devices.tablet
        )
        seen += during.upserts["Card"]?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
        #expect(seen.isEmpty, "nothing of the scope is committed yet, so nothing may be read: \(seen)")

        processes.release.open()
        _ = try await slowAnswer.value
        _ = try await fastAnswer.value
        let after = try await pull.pull(
            scope: "team", cursor: during.cursor, limit: 100, schema: [:], clientID: nil, identity: Self.devices.tablet
        )
        seen += after.upserts["Card"]?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
        #expect(seen == ["slow-1", "slow-2", "slow-3", "fast-1", "fast-2", "fast-3"], "in sequence order, none skipped")
    }
}

extension ConcurrencyTests {
    @Test(
        "one new id pushed into two scopes at once is stored once, by the push that commits first; the other is refused",
        arguments: StorageKind.allCases)
    func sameNewIDInTwoScopes(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let processes = try await TwoProcesses(kind, folder: h.folder)
        let blue = DeviceIdentity(tenant: PushHarness.tenant, userID: "carol", deviceID: "carol-phone", teams: ["blue"], expiresAt: .max)
        let red = PushRequest(
            clientId: "alice-phone", schema: [:], mutations: [h.mutation(1, "Card", .create, "card-twice", h.cardPayload("card-twice"))])
        let other = PushRequest(
            clientId: "carol-phone", schema: [:], mutations: [h.mutation(1, "Card", .create, "card-twice", h.cardPayload("card-twice", team: "blue"))]
        )
        // The first push has read the id as absent and stops before its commit. On SQLite the
        // second waits for the writer and then finds the row; on PostgreSQL the second, which
        // read it as absent too, commits first, and the first's insert then fails on the key
        // and its transaction runs again, finding the row in the other scope.
        let first = Task { try await processes.heldPush.push(red, identity: Self.devices.phone) }
        await processes.reached.wait()
        let second = Task { try await processes.otherPush.push(other, identity: blue) }
        if kind == .postgres { _ = try await second.value } else { try await processes.waitUntilBlocked("the second writer waits") }
        processes.release.open()
        let (one, two) = (try await first.value, try await second.value)
        let statuses = [one.results.map(\.status), two.results.map(\.status)]
        #expect(statuses.filter { $0 == [.applied] }.count == 1 && statuses.filter { $0 == [.rejected] }.count == 1, "\(statuses)")
        let rows = try await processes.storages[1].read { reader in
            try await reader.rows(in: ContractTable(Card.descriptor), tenant: PushHarness.tenant, where: [:], limit: 10)
        }
        #expect(rows.map { $0.text("id") } == ["card-twice"])
        #expect(rows.map { $0.text("_scope_key") } == [one.results[0].status == .applied ? "workspace:team:red" : "workspace:team:blue"])
        #expect(kind == .sqlite ? one.results[0].status == .applied : two.results[0].status == .applied)
    }
}

extension JSONValue {
    var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}

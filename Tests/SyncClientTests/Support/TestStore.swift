import ContractRuntime
import Contracts
import Foundation
import GRDB
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// Where a test device keeps its store in a temporary folder.
extension TemporaryDirectory {
    var databaseURL: URL { url.appendingPathComponent("store.sqlite") }
    var keysURL: URL { url.appendingPathComponent("keys", isDirectory: true) }
}

/// A store on a real SQLite file in a temporary folder, with a manual clock and seeded ids.
struct TestStore {
    let directory: TemporaryDirectory
    let clock: ManualClock
    let keys: any KeyProvider
    let store: OfflineStore
    /// The contracts the store was opened on, and its extensions: the sample's by default,
    /// the engines' own for ``TestStore/engine(directory:clock:keys:tenantId:userId:retention:)``.
    let contracts: any ContractSchema.Type
    let extensions: [any StoreExtension]

    static let start = Date(timeIntervalSince1970: 1_769_846_400)  // 2026-01-31T08:00:00Z

    init(
        directory: TemporaryDirectory? = nil, clock: ManualClock = ManualClock(TestStore.start), keys: (any KeyProvider)? = nil,
        tenantId: String = "acme", userId: String = "u-1", retention: RetentionPolicy = .standard,
        contracts: any ContractSchema.Type = ContractRegistry.self, extensions: [any StoreExtension] = [LearningStore()]
    ) throws {
        let directory = try directory ?? TemporaryDirectory()
        let keys = keys ?? FileKeyProvider(directory: directory.keysURL)
        self.directory = directory
        self.clock = clock
        self.keys = keys
        self.contracts = contracts
        self.extensions = extensions
        store = try OfflineStore(
            Self.configuration(directory: directory, clock: clock, keys: keys, tenantId: tenantId, userId: userId, retention: retention),
            contracts: contracts, extensions: extensions
        )
    }

    static func configuration(
        directory: TemporaryDirectory, clock: ManualClock, keys: any KeyProvider, tenantId: String = "acme", userId: String = "u-1",
        retention: RetentionPolicy = .standard
    ) -> OfflineStoreConfiguration {
        OfflineStoreConfiguration(
            databaseURL: directory.databaseURL, tenantId: tenantId, userId: userId, deviceId: "device-1", keyProvider: keys,
            clock: clock, random: SeededRandomSource(seed: 42), retention: retention
        )
    }

    /// A second store on the same file (after closing this one), as an app restart would.
    func reopen() throws -> TestStore {
        try store.close()
        return try TestStore(directory: directory, clock: clock, keys: keys, contracts: contracts, extensions: extensions)
    }

    /// Raw SQL on the database file, outside the store (a separate connection).
    func raw<T>(_ body: (Database) throws -> T) throws -> T {
        let queue = try DatabaseQueue(path: directory.databaseURL.path)
        defer { try? queue.close() }
        return try queue.writeWithoutTransaction(body)
    }
}

/// Sample rows in wire form, as the server sends them.
enum Samples {
    static let t0 = Timestamp(millisecondsSince1970: 1_769_846_400_000)

    static func wire<Value: Encodable>(_ value: Value) -> JSONValue {
        try! JSONValue(encoding: value)
    }

    static let units = [
        Unit(id: "unit-2", title: "Fractions", learnerLevel: .intermediate, sortIndex: 2, tags: ["math"], updatedAt: t0),
        Unit(id: "unit-1", title: "Counting", description: "Numbers to 100", learnerLevel: .beginner, sortIndex: 1, updatedAt: t0),
    ]

    static let lessons = [
        Lesson(id: "lesson-b", unitId: "unit-1", title: "Tens", sortIndex: 2, lessonKind: .reading, updatedAt: t0),
        Lesson(id: "lesson-a", unitId: "unit-1", title: "Ones", sortIndex: 1, lessonKind: .audio, updatedAt: t0),
        Lesson(id: "lesson-c", unitId: "unit-2", title: "Halves", sortIndex: 1, lessonKind: .video, updatedAt: t0),
    ]

    static let assets = [
        Asset(
            id: "asset-1", lessonId: "lesson-a", assetKind: .audio, contentType: "audio/mpeg", sizeBytes: 1000,
            checksum: String(repeating: "a", count: 64), storageKey: "a/1.mp3", updatedAt: t0
        ),
        Asset(
            id: "asset-2", lessonId: "lesson-a", assetKind: .image, contentType: "image/png", sizeBytes: 200,
            checksum: String(repeating: "b", count: 64), storageKey: "a/2.png", updatedAt: t0
        ),
    ]

    static let tasks = [
        FieldTask(id: "task-2", teamId: "team-1", assigneeId: "u-1", title: "Swap battery", taskKind: .batterySwap, sortIndex: 2, revision: 3),
        FieldTask(id: "task-1", teamId: "team-1", assigneeId: "u-2", title: "Inspect", taskKind: .inspection, sortIndex: 1, revision: 7),
        FieldTask(id: "task-3", teamId: "team-2", title: "Clean", taskKind: .cleaning, status: .completed, revision: 1),
    ]

    static func incident(_ id: String, priority: Incident.Priority, openedAt: Int64, number: String? = nil) -> Incident {
        Incident(
            id: id, teamId: "team-1", number: number ?? "INC-\(id)", shortDescription: "Pump \(id)", state: .new, priority: priority,
            reporterNotes: "secret notes of \(id)", openedAt: Timestamp(millisecondsSince1970: openedAt), updatedAt: t0
        )
    }

    static let incidents = [
        incident("inc-low", priority: .low, openedAt: 1_000),
        incident("inc-crit", priority: .critical, openedAt: 2_000),
        incident("inc-high-old", priority: .high, openedAt: 3_000),
        incident("inc-high-new", priority: .high, openedAt: 4_000),
    ]

    static let attempts = [
        Attempt(id: "att-1", assessmentId: "quiz-1", state: .closed, startedAt: Timestamp(millisecondsSince1970: 1_000), updatedAt: t0),
        Attempt(id: "att-2", assessmentId: "quiz-1", state: .open, startedAt: Timestamp(millisecondsSince1970: 5_000), updatedAt: t0),
        Attempt(id: "att-3", assessmentId: "quiz-2", state: .open, startedAt: Timestamp(millisecondsSince1970: 3_000), updatedAt: t0),
    ]

    static let serviceAsset = ServiceAsset(
        id: "sa-1", teamId: "team-1", assetTag: "SCOOT-1", displayName: "Scooter 1", category: .vehicle, updatedAt: t0
    )

    /// Everything above as one server page.
    static var everything: ServerChanges {
        ServerChanges(upserts: [
            "Unit": units.map(wire), "Lesson": lessons.map(wire), "Asset": assets.map(wire), "Task": tasks.map(wire),
            "Incident": incidents.map(wire), "Attempt": attempts.map(wire), "ServiceAsset": [wire(serviceAsset)],
        ])
    }
}

extension OfflineStore {
    /// The only unsent mutation, for tests that look at one write.
    func onlyPendingMutation(sourceLocation: SourceLocation = #_sourceLocation) throws -> Mutation? {
        let mutations = try pendingMutations(limit: 100)
        #expect(mutations.count == 1, "expected one queued mutation, found \(mutations.count)", sourceLocation: sourceLocation)
        return mutations.first
    }
}

import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sync-device keys rotate` killed with SIGKILL at random batches: the database left behind
/// holds every sealed value under one of the two key versions, the next open finishes the
/// rotation, every row and queued write reads back as written, and the writes still reach the
/// server exactly once.
@Suite("Crash suite: data key rotation", .serialized, .blockingWork)
struct KeyRotationCrashTests {
    /// Incidents written on the device, each with sealed reporter notes and a queued write.
    static let incidents = 120

    @Test("kill -9 of a data key rotation at random batches: every value readable with one of the two keys, the next open finishes it")
    func rotationKilledAtRandomBatches() async throws {
        var plan = CrashPlan("data key rotation killed part way", iterations: 6)
        var tally = KillTally(plan)
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-rue", teams: [Stage.team])
        let written = try DeviceInspector.read(tablet) { inspector in
            try (0..<Self.incidents).map { index in
                let incident = Self.incident(index)
                try inspector.store.create(incident)
                return incident
            }
        }
        let queued = try DeviceInspector.read(tablet) { try $0.store.pendingMutations(limit: 10_000) }
        #expect(queued.count >= Self.incidents)

        var version = 1
        for _ in 0..<plan.iterations {
            // Batches of 3 rows make about 80 transactions; the kill waits for a random one.
            let target = plan.int(1...60)
            let rotation = try tablet.start(["keys", "rotate", "--batch-size", "3", "--progress"])
            _ = try rotation.poll { rotation.stdout.contains("batch \(target):") || !rotation.isRunning }
            Stopwatch.sleep(plan.seconds(0...0.01))
            let finishedFirst = !rotation.isRunning
            rotation.signal(SIGKILL)
            _ = try rotation.wait()

            // What the kill left, read below the library (its open would finish the rotation).
            let left = try Self.sealedVersions(tablet)
            let keys = try Self.keyVersions(tablet)
            if finishedFirst || left.rotatingFrom == nil {
                tally.record("after the rotation ended")
                #expect(Set(left.headers.keys) == [version + 1], "\(left)")
            } else {
                tally.record("part way, values under both versions")
                #expect(left.rotatingFrom == version && left.current == version + 1, "\(left)")
                #expect(Set(left.headers.keys).isSubset(of: [version, version + 1]), "a value sealed under neither version: \(left)")
                #expect(keys.contains(version) && keys.contains(version + 1), "a key still needed is gone: \(keys)")
            }
            version += 1

            // The next open finishes the rotation; everything reads back as written.
            try DeviceInspector.read(tablet) { (inspector: DeviceInspector) throws in
                let status = inspector.store.dataKeyStatus()
                #expect(status.version == version && status.rotatingFrom == nil)
                for incident in written {
                    #expect(try inspector.store.fetch(Incident.self, id: incident.id) == incident)
                }
                #expect(try inspector.store.pendingMutations(limit: 10_000) == queued)
                #expect(try inspector.store.outboxIntegrityProblem() == nil)
                #expect(try inspector.store.quarantinedEntries().isEmpty)
            }
            #expect(Set(try Self.sealedVersions(tablet).headers.keys) == [version])
        }
        tally.report()
        #expect(tally["part way, values under both versions"] > 0, "no kill landed during a rotation: \(tally.summary)")

        // A finished rotation deletes the older key files; the writes reach the server once.
        let last = try tablet.json(["keys", "rotate", "--json"])
        #expect(last["to_version"].int == Int64(version + 1))
        #expect(try tablet.json(["keys", "status", "--json"])["key_versions_kept"].array.compactMap(\.int) == [Int64(version + 1)])
        #expect(try Self.keyVersions(tablet) == [version + 1])
        try tablet.ok(["sync"])
        try await stage.expectAgreement(tablet)
        try await stage.stopAndExpectEveryWriteOnce(tablet)
    }

    static func incident(_ index: Int) -> Incident {
        Incident(
            id: "inc-rot-\(index)", teamId: Stage.team, number: "INC-ROT-\(index)", shortDescription: "Rotation \(index)", state: .new,
            reporterNotes: "call the reporter back at 555-01\(index)", openedAt: Timestamp(millisecondsSince1970: 1_000 * Int64(index)),
            updatedAt: Timestamp(millisecondsSince1970: 1_000 * Int64(index))
        )
    }

    /// The key versions the device's database says it is sealed with, and how many sealed values
    /// each version sealed (read with SQLite alone).
    struct SealedVersions: CustomStringConvertible {
        var current: Int
        var rotatingFrom: Int?
        var headers: [Int: Int]
        var description: String { "current \(current), rotating from \(rotatingFrom.map(String.init) ?? "none"), values by version \(headers)" }
    }

    static func sealedVersions(_ device: Device) throws -> SealedVersions {
        var configuration = Configuration()
        configuration.readonly = true
        let database = try DatabaseQueue(path: device.home.appendingPathComponent("outpost.sqlite").path, configuration: configuration)
        defer { try? database.close() }
        return try database.read { db in
            func number(_ key: String) throws -> Int? {
                try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = ?", arguments: [key]).flatMap { Int($0) }
            }
            let current = try number("key_version") ?? 1
            let previous = try number("rotating_from_key_version")
            let sealed = try Data.fetchAll(
                db,
                sql: """
                    SELECT substr(reporter_notes, 1, 5) FROM incidents WHERE reporter_notes IS NOT NULL
                    UNION ALL SELECT substr(payload, 1, 5) FROM outbox
                    """)
            var headers: [Int: Int] = [:]
            for header in sealed {
                // 0x01: version 1; 0x02 and a 4-byte big-endian version otherwise.
                let version = header.first == 1 ? 1 : header.dropFirst().prefix(4).reduce(0) { $0 << 8 | Int($1) }
                headers[version, default: 0] += 1
            }
            return SealedVersions(current: current, rotatingFrom: previous, headers: headers)
        }
    }

    /// The key versions whose files are in the device's key folder (looked at without opening
    /// the store, whose open would finish a rotation).
    static func keyVersions(_ device: Device) throws -> [Int] {
        let keys = FileKeyProvider(directory: device.home.appendingPathComponent("keys", isDirectory: true))
        return (1...64).filter { FileManager.default.fileExists(atPath: keys.fileURL(forTenant: Stage.tenant, version: $0).path) }
    }
}

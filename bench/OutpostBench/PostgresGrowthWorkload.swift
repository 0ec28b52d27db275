import ContractRuntime
import Contracts
import Foundation
import SampleServerApps
import SyncProtocol
import SyncServer

/// A table filled from empty by pushes of `last_writer_wins` creates with a unique index
/// (`AssessmentResponse`): 40 pushes of 500 by one learner's device through ``PushService``, on a
/// fresh SQLite and a fresh PostgreSQL schema, each push timed on its own.
///
/// A push's cost must not grow with the table: on PostgreSQL it once did (a uniqueness lookup
/// that scanned the scope until autovacuum analyzed the table; docs/scaling.md). The figures are
/// each storage's total, and its last pushes' median against its first pushes' (the table 16
/// times larger by then).
enum PostgresGrowthWorkload {
    static let pushes = 40
    static let batch = 500
    /// The pushes compared at each end of the run (medians).
    static let window = 5
    /// A push's cost in the full table at most this many times its cost in the nearly empty one.
    static let flatBar = 1.2

    static let learner = DeviceIdentity(
        tenant: "bench-tenant", userID: "learner-1", deviceID: "phone-1", teams: [], expiresAt: 4_102_444_800)

    struct Outcome {
        var total: Double
        var first: Double
        var last: Double
        var growth: Double { last / first }
    }

    /// The pushes: answers to 10 questions per attempt, each a new row with a new UUID.
    static func requests() -> [PushRequest] {
        var generator = SeededGenerator(seed: 0x6772_6F77)
        let start = Timestamp(iso8601: "2026-02-02T08:00:00.000Z")!.millisecondsSince1970
        return (0..<pushes).map { push in
            let mutations = (0..<batch).map { index -> Mutation in
                let number = push * batch + index
                let seq = Int64(number + 1)
                let id = UUID(generator: &generator).uuidString.lowercased()
                let at = start + Int64(number) * 1000
                return Mutation(
                    seq: seq, clientMutationId: "cm-\(seq)", entity: "AssessmentResponse", op: .create, id: id,
                    payload: .object([
                        "id": .string(id), "assessment_id": .string("assessment-\(number / 1000)"), "attempt_id": .string("attempt-\(number / 10)"),
                        "question_id": .string("q-\(number % 10)"), "answer": .object(["choice": .int(Int64(number % 4))]),
                        "time_spent_ms": .int(Int64(1000 + number % 9000)), "flagged_for_review": .bool(number % 17 == 0),
                        "answered_at": .string(Timestamp(millisecondsSince1970: at).iso8601),
                        "updated_at": .string(Timestamp(millisecondsSince1970: at).iso8601),
                    ]),
                    hlc: HybridLogicalClock(milliseconds: at, counter: 0, node: "phone-1").description
                )
            }
            return PushRequest(clientId: "phone-1", schema: [:], mutations: mutations)
        }
    }

    /// Pushes every request in order on `storage`, timing each; fails unless every mutation applied.
    static func run(_ requests: [PushRequest], on storage: any SyncStorage) async throws -> Outcome {
        let service = PushService(storage: storage, reducers: SampleServerApps.reducers)
        var durations: [Double] = []
        let clock = ContinuousClock()
        for request in requests {
            let started = clock.now
            let response: PushResponse
            do throws(ServiceError) {
                response = try await service.push(request, identity: learner)
            } catch {
                throw BenchmarkError("push refused (\(error.status) \(error.detail.code.rawValue)): \(error.detail.message)")
            }
            let elapsed = clock.now - started
            durations.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            let applied = response.results.filter { $0.status == .applied }.count
            if applied != request.mutations.count { throw BenchmarkError("\(applied) of \(request.mutations.count) creates applied") }
        }
        func median(_ values: ArraySlice<Double>) -> Double {
            let sorted = values.sorted()
            return sorted[sorted.count / 2]
        }
        return Outcome(
            total: durations.reduce(0, +), first: median(durations.prefix(window)), last: median(durations.suffix(window)))
    }
}

extension UUID {
    /// A version-4 UUID from a seeded generator: the same run, the same ids.
    init(generator: inout SeededGenerator) {
        var bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        self.init(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11],
                bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}

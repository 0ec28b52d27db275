import ContractRuntime
import Contracts
import Foundation
import SampleServerApps
import SyncProtocol
import SyncServer

/// A table filled from empty by pushes of `last_writer_wins` creates with a unique index
/// (`AssessmentResponse`): 80 pushes of 500 by one learner's device through ``PushService``, on a
/// fresh SQLite and a fresh PostgreSQL schema, each push timed on its own.
///
/// A push's cost must not grow with the table: on PostgreSQL it once did (a uniqueness lookup
/// that scanned the scope until autovacuum analyzed the table; docs/scaling.md). The figures are
/// each storage's total, and its last ten pushes' median against its first ten's (the table
/// 14 times larger by then). Ten, not five: on two cores one autovacuum pass over the growing
/// table lands in a five-push window and moves its median by a quarter.
enum PostgresGrowthWorkload {
    static let pushes = 80
    static let batch = 500
    /// The pushes compared at each end of the run (medians).
    static let window = 10
    /// Rounds, each from an empty table; the round with the median growth counts.
    static let rounds = 3
    /// A push's cost in the full table at most this many times its cost in the nearly empty one.
    static let flatBar = 1.2
    /// How many times the rows the last window's pushes meet exceed those the first window's
    /// meet (each window's middle push).
    static var rowsGrowth: Int { (2 * pushes - window) / window }

    /// The `last_writer_wins` policy of the entity-write workload: its identity, rows and ids.
    static let policy = EntityWriteWorkload.policies.first { $0.entity.conflict == .lastWriterWins }!
    static var learner: DeviceIdentity { policy.identity(0) }

    struct Outcome {
        var total: Double
        var first: Double
        var last: Double
        var growth: Double { last / first }
    }

    /// The pushes: answers to 10 questions per attempt, each a new row (set 2 of the policy's ids).
    static func requests() -> [PushRequest] {
        (0..<pushes).map { push in
            let mutations = (0..<batch).map { index -> Mutation in
                let number = push * batch + index
                let seq = Int64(number + 1)
                let at = EntityWriteWorkload.start + Int64(number) * 1000
                return Mutation(
                    seq: seq, clientMutationId: "cm-\(seq)", entity: policy.entity.name, op: .create, id: policy.id(2, number),
                    payload: .object(policy.row(2, number, 0)),
                    hlc: HybridLogicalClock(milliseconds: at, counter: 0, node: learner.deviceID).description
                )
            }
            return PushRequest(clientId: learner.deviceID, schema: [:], mutations: mutations)
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

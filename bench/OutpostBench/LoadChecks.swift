import ContractRuntime
import Contracts
import Foundation
import SyncServer

/// Samples server processes' resident memory (VmRSS), open descriptors (`/proc/PID/fd`) and
/// CPU time once a period, on a thread of its own, while a load runs.
final class ServerSampler: @unchecked Sendable {
    struct Sample: Sendable {
        var seconds: Double
        var residentKiB: Int
        var descriptors: Int
        /// CPU seconds used since the previous sample, over the period: 1.0 is one core.
        var cores: Double
    }

    let pids: [Int32]
    let period: Double
    private let lock = NSLock()
    private var series: [[Sample]]
    private var running = true
    private let done = DispatchSemaphore(value: 0)

    init(pids: [Int32], period: Double = 1) {
        self.pids = pids
        self.period = period
        series = Array(repeating: [], count: pids.count)
        let thread = Thread { [self] in loop() }
        thread.start()
    }

    private func loop() {
        let start = monotonicNanoseconds()
        var lastCPU = pids.map { ProcessMemory.cpuSeconds(pid: $0) ?? 0 }
        var lastTime = start
        while lock.withLock({ running }) {
            let now = monotonicNanoseconds()
            let elapsed = Double(now - lastTime) / 1e9
            for (index, pid) in pids.enumerated() {
                let cpu = ProcessMemory.cpuSeconds(pid: pid) ?? lastCPU[index]
                let sample = Sample(
                    seconds: Double(now - start) / 1e9, residentKiB: ProcessMemory.status("VmRSS", pid: pid),
                    descriptors: Self.openDescriptors(pid: pid), cores: elapsed > 0 ? (cpu - lastCPU[index]) / elapsed : 0
                )
                lastCPU[index] = cpu
                lock.withLock { series[index].append(sample) }
            }
            lastTime = now
            Thread.sleep(forTimeInterval: period)
        }
        done.signal()
    }

    /// Stops sampling; the series of each process.
    func stop() -> [[Sample]] {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { series }
    }

    static func openDescriptors(pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// A short series for the table: at most `points` samples, evenly spaced, as
    /// `t=3s 41.2 MiB 812 fd 0.9 cores`.
    static func timeline(_ samples: [Sample], points: Int = 8) -> String {
        guard !samples.isEmpty else { return "no samples" }
        let step = max(1, samples.count / points)
        var picked = stride(from: 0, to: samples.count, by: step).map { samples[$0] }
        if picked.last?.seconds != samples.last?.seconds { picked.append(samples.last!) }
        return picked.map {
            "\(Int($0.seconds.rounded()))s \(Format.fixed(Double($0.residentKiB) / 1024, 0)) MiB/\($0.descriptors) fd/\(Format.fixed($0.cores, 1))c"
        }.joined(separator: ", ")
    }
}

/// Every mutation the devices pushed is on the server exactly once: each pushed `Task` id is a
/// row of its team's scope, the audit log records it `applied` once (and nothing else of it),
/// no row the devices did not push carries their prefix, and each device's stream stands at
/// the last `seq` it was answered for.
enum ExactlyOnce {
    struct Expected: Sendable {
        /// Task ids by team.
        var idsByTeam: [String: Set<String>] = [:]
        /// The last `seq` each client was answered for.
        var lastSeqByClient: [String: Int64] = [:]
        var count: Int { idsByTeam.values.reduce(0) { $0 + $1.count } }
    }

    struct Report: Sendable {
        var pushed: Int
        var rowsFound: Int
        var appliedOnce: Int
        var problems: [String]
        var passed: Bool { problems.isEmpty }
    }

    /// `prefix` is what every id the devices made starts with.
    static func check(_ expected: Expected, prefix: String, storage: any SyncStorage, tenant: String) async throws -> Report {
        var problems: [String] = []
        let table = ContractTable(ContractRegistry.task)
        var rowsFound = 0
        for (team, ids) in expected.idsByTeam {
            let scopeKey = ContractRegistry.scope(named: "team")!.key(["team_id": team])!
            var found: [String: Int] = [:]
            var after: Int64 = 0
            while true {
                let from = after
                let changes = try await storage.read { reader in
                    try await reader.changes(
                        in: [table], tenant: tenant, scopeKey: scopeKey, after: from, limit: 5_000, byteBudget: .max, pageColumnsOnly: false)
                }
                for (_, row) in changes {
                    if let id = row.text("id"), id.hasPrefix(prefix) { found[id, default: 0] += 1 }
                    after = max(after, row.integer("_seq") ?? after)
                }
                if changes.count < 5_000 { break }
            }
            rowsFound += found.count
            let missing = ids.subtracting(found.keys)
            let extra = Set(found.keys).subtracting(ids)
            let doubled = found.filter { $0.value > 1 }
            if !missing.isEmpty { problems.append("\(team): \(missing.count) pushed rows missing, e.g. \(missing.sorted().prefix(3))") }
            if !extra.isEmpty { problems.append("\(team): \(extra.count) rows nobody was answered for, e.g. \(extra.sorted().prefix(3))") }
            if !doubled.isEmpty { problems.append("\(team): \(doubled.count) rows twice") }
        }

        // The audit log, whole, details in clear: each pushed id applied once and audited once
        // (a push's entry lists each of its mutations).
        var audited: [String: [AuditOutcome]] = [:]
        var afterID: Int64 = 0
        while true {
            let from = afterID
            let key = storage.auditKey
            let (entries, details) = try await storage.read { reader in
                let entries = try await reader.auditEntries(after: from, limit: 1_000)
                return (entries, try await AuditChain.readableDetails(of: entries, in: reader, key: key))
            }
            for (entry, detail) in zip(entries, details) {
                guard let detail else { problems.append("audit entry \(entry.id): its detail was erased"); continue }
                for change in try AuditedChange.changes(of: entry, readableDetail: detail)
                where change.operation != .fold && change.entity == "Task" && change.rowID.hasPrefix(prefix) {
                    audited[change.rowID, default: []].append(change.outcome)
                }
            }
            guard let last = entries.last else { break }
            afterID = last.id
        }
        let all = expected.idsByTeam.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        var appliedOnce = 0
        var notOnce: [String] = []
        for id in all {
            if audited[id] == [.applied] { appliedOnce += 1 } else { notOnce.append(id) }
        }
        if !notOnce.isEmpty {
            problems.append(
                "\(notOnce.count) pushed mutations not audited `applied` exactly once, e.g. "
                    + notOnce.sorted().prefix(3).map { "\($0): \(audited[$0] ?? [])" }.joined(separator: ", ")
            )
        }
        let unknown = Set(audited.keys).subtracting(all)
        if !unknown.isEmpty { problems.append("\(unknown.count) audited ids no device was answered for, e.g. \(unknown.sorted().prefix(3))") }

        for (client, lastSeq) in expected.lastSeqByClient {
            let stored = try await storage.read { reader in try await reader.lastSequence(tenant: tenant, clientID: client) }
            if stored != lastSeq { problems.append("client \(client): the server's last_seq is \(stored), the device was answered for \(lastSeq)") }
        }
        return Report(pushed: all.count, rowsFound: rowsFound, appliedOnce: appliedOnce, problems: problems)
    }
}

import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// The quality bar (issue 47, part 2, docs/PERFORMANCE.md): "push bytes saved by gzip on the
/// sample apps' workloads: at least 50 %", with the device's CPU time for it.
///
/// Each workload is what a device of a sample app writes while offline, written through the
/// store's public API into a fresh ``OfflineStore`` (a learner's assessment and day of lessons,
/// a field operative's shift, a single edit). The outbox is then taken as the engine takes it,
/// in pushes of ``SyncEngineConfiguration/pushBatchSize`` mutations, and each push body is
/// made exactly as `URLSessionTransport` makes it: `JSONEncoder` for the JSON, then
/// ``URLSessionTransport/compressedPushBody(_:)`` (gzip at the transport's level when the body
/// is at least ``URLSessionTransport/pushCompressionThreshold``, else nothing). The bytes are
/// what goes on the wire as the body; the bar is the share of a workload's push bytes saved.
/// Every compressed body is inflated back and compared with its JSON.
///
/// The CPU: per push, the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) to encode the JSON and
/// to compress it, each the median of ``repetitions`` runs, and compression's share next to the
/// encoding the transport does anyway; zlib's level 1 (the server's for responses) beside it.
enum PushCompressionBenchmark {
    /// The least share of push bytes gzip must save on each workload that sends a compressed push.
    static let barSaved = 0.5
    static let repetitions = 201

    static let benchmark = Benchmark(
        name: "push-compression",
        summary: "gzip on push bodies of the sample apps' offline writes, as URLSessionTransport sends them "
            + "(bar: at least \(Format.percent(barSaved)) of the push bytes saved; the device's CPU for it recorded)",
        run: { try run() }
    )

    struct Workload: Sendable {
        var name: String
        var writes: @Sendable (OfflineStore) throws -> Void
    }

    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    static let workloads: [Workload] = [
        Workload(name: "learner: one assessment of 20 questions, taken offline") { store in
            try assessment(store, number: 0)
        },
        Workload(name: "learner: a day offline (6 lessons, 3 assessments)") { store in
            for lesson in 0..<6 {
                let session = UUID(uuidString: String(format: "6c1a2b3c-0000-4000-8000-%012d", lesson))!
                for step in 1...8 {
                    try store.record(
                        LessonProgressed(
                            lessonId: "lesson-\(lesson)-ladders-and-scaffolds", unitId: "unit-working-at-height", sessionId: session,
                            progress: Double(step) / 8, positionMs: Int64(step) * 45_000, completed: step == 8, offlineMinutes: Int64(step * 3)),
                        occurredAt: start.addingTimeInterval(Double(lesson * 900 + step * 60)))
                }
            }
            for number in 1...3 { try assessment(store, number: number) }
        },
        Workload(name: "field operative: a shift offline (12 tasks, 3 issues, 2 incidents)") { store in
            for task in 0..<12 {
                let id = "task-2026-11-\(String(format: "%04d", task))"
                try store.record(
                    TaskStarted(
                        teamId: "team-north", taskId: id, latitude: 51.5072 + Double(task) / 1000, longitude: -0.1276,
                        note: "On site, access via the rear gate"),
                    occurredAt: start.addingTimeInterval(Double(task * 1800)))
                try store.record(
                    TaskStatusChanged(
                        teamId: "team-north", taskId: id, fromStatus: .inProgress, toStatus: task % 5 == 4 ? .blocked : .completed, baseRevision: 3,
                        reason: task % 5 == 4 ? "Replacement part not in the van" : nil),
                    occurredAt: start.addingTimeInterval(Double(task * 1800 + 1500)))
            }
            for issue in 0..<3 {
                try store.record(
                    IssueLogged(
                        teamId: "team-north", serviceAssetId: "asset-pump-\(issue + 7)", taskId: "task-2026-11-000\(issue)",
                        category: issue == 0 ? .damage : .safety, severity: .high,
                        description: "Cracked inspection mirror on the housing; the seal behind it is weeping. Cordoned off the area.",
                        tags: ["housing", "seal"], latitude: 51.5072, longitude: -0.1276, observedOn: CalendarDate(year: 2026, month: 11, day: 29)))
            }
            for incident in 0..<2 {
                let id = "inc-north-\(incident)"
                try store.create(
                    Incident(
                        id: id, teamId: "team-north", number: "INC-\(4_200 + incident)", shortDescription: "Pump station \(incident + 7) leaking",
                        description: "Water pooling under the inlet valve; pressure reading 2.1 bar against 3.0 expected.", state: .new,
                        priority: .high,
                        reporterName: "Ana Ferreira", latitude: 51.5072, longitude: -0.1276, tags: ["pump", "leak"], openedAt: Timestamp(start),
                        updatedAt: Timestamp(start)))
                try store.patch(Incident.self, id: id, [.state(.inProgress), .assigneeId("u-ana")])
            }
        },
        Workload(name: "a single edit (under the threshold: sent as is)") { store in
            try store.record(TaskStarted(teamId: "team-north", taskId: "task-2026-11-0001"))
        },
    ]

    /// The writes of one assessment taken offline: its statements, an answer per question and the submission.
    static func assessment(_ store: OfflineStore, number: Int) throws {
        let attempt = "attempt-\(number)-" + String(format: "%08d", number * 7919)
        let assessmentID = "assessment-fall-protection-\(number)"
        try store.create(
            Statement(
                id: String(format: "2f6b7c8d-0000-4000-8000-%012d", number * 2), verb: .attempted, objectId: assessmentID, attemptId: attempt,
                statedAt: Timestamp(start)))
        for question in 0..<20 {
            try store.record(
                AnswerRecorded(
                    attemptId: attempt, questionId: "\(assessmentID)-q\(question)",
                    answer: question % 3 == 0 ? .array([.string("B"), .string("D")]) : .string(["A", "B", "C", "D"][question % 4]),
                    timeSpentMs: Int64(8_000 + question * 731)),
                occurredAt: start.addingTimeInterval(Double(question * 20)))
        }
        try store.record(
            AttemptSubmitted(
                attemptId: attempt, assessmentId: assessmentID, answeredCount: 20, totalTimeMs: 412_000, submittedOffline: true, assessmentRevision: 1
            ),
            occurredAt: start.addingTimeInterval(420))
        try store.create(
            Statement(
                id: String(format: "2f6b7c8d-0000-4000-8000-%012d", number * 2 + 1), verb: .answered, objectId: assessmentID, attemptId: attempt,
                durationMs: 412_000, result: .object(["completion": .bool(true), "response_count": .int(20)]),
                statedAt: Timestamp(start.addingTimeInterval(420))))
    }

    /// One push as measured.
    struct Push {
        var mutations: Int
        var jsonBytes: Int
        var sentBytes: Int
        var compressed: Bool
        var level1Bytes: Int
        var encodeSeconds: Double
        var compressSeconds: Double
        var level1Seconds: Double
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let workspace = try TemporaryFolder("push-compression")
        defer { workspace.remove() }
        let transport = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:9")!) { "unused" }
        guard let threshold = transport.pushCompressionThreshold else { throw BenchmarkError("the transport's default compresses no push") }
        let batch = SyncEngineConfiguration(scopes: []).pushBatchSize
        result.fact(
            "push bodies",
            "as URLSessionTransport sends them: JSONEncoder, then gzip (zlib \(Zlib.version), level \(URLSessionTransport.pushCompressionLevel)) from \(Format.bytes(threshold)); \(batch) mutations a push"
        )
        result.fact("CPU", "thread CPU time (CLOCK_THREAD_CPUTIME_ID), median of \(repetitions) runs per push")

        var rows: [BenchmarkResult.Row] = []
        var problems: [String] = []
        var saved: [(String, Double, Bool)] = []
        for (index, workload) in workloads.enumerated() {
            let folder = try workspace.folder("device-\(index)")
            let store = try ClientStoreBenchmarks.openStore(folder)
            try workload.writes(store)
            guard let all = try store.nextPushRequest(limit: 100_000) else { throw BenchmarkError("\(workload.name): nothing queued") }
            try store.close()
            workspace.remove(folder)

            var pushes: [Push] = []
            var start = 0
            while start < all.mutations.count {
                let mutations = Array(all.mutations[start..<min(start + batch, all.mutations.count)])
                start += batch
                let request = PushRequest(clientId: all.clientId, schema: all.schema, mutations: mutations)
                let json = try JSONEncoder().encode(request)
                let body = transport.compressedPushBody(json)
                if let body, (try? Gzip.decompress(body, limit: json.count)) != json {
                    problems.append("\(workload.name): a compressed push does not inflate to its JSON")
                }
                let level1 = Gzip.compress(json, level: 1)
                pushes.append(
                    Push(
                        mutations: mutations.count, jsonBytes: json.count, sentBytes: body?.count ?? json.count, compressed: body != nil,
                        level1Bytes: level1.count,
                        encodeSeconds: medianThreadCPU { _ = try? JSONEncoder().encode(request) },
                        compressSeconds: medianThreadCPU { _ = transport.compressedPushBody(json) },
                        level1Seconds: medianThreadCPU { _ = Gzip.compress(json, level: 1) }))
            }
            let json = pushes.reduce(0) { $0 + $1.jsonBytes }
            let sent = pushes.reduce(0) { $0 + $1.sentBytes }
            let level1 = pushes.reduce(0) { $0 + ($1.compressed ? $1.level1Bytes : $1.jsonBytes) }
            let share = 1 - Double(sent) / Double(json)
            let anyCompressed = pushes.contains { $0.compressed }
            saved.append((workload.name, share, anyCompressed))
            let encode = pushes.reduce(0) { $0 + $1.encodeSeconds }
            let compress = pushes.reduce(0) { $0 + ($1.compressed ? $1.compressSeconds : 0) }
            let compress1 = pushes.reduce(0) { $0 + ($1.compressed ? $1.level1Seconds : 0) }
            rows.append(
                .init(
                    workload.name, median: "\(Format.bytes(json)) → \(Format.bytes(sent))",
                    note:
                        "\(Format.percent(share)) saved; \(all.mutations.count) write\(all.mutations.count == 1 ? "" : "s") in \(pushes.count) push\(pushes.count == 1 ? "" : "es"); level 1 would send \(Format.bytes(level1)) (\(Format.percent(1 - Double(level1) / Double(json))) saved)"
                ))
            if anyCompressed {
                rows.append(
                    .init(
                        "  device CPU per push: gzip (level \(URLSessionTransport.pushCompressionLevel)) / JSON encoding",
                        median: "\(micro(compress / Double(pushes.count))) / \(micro(encode / Double(pushes.count)))",
                        note:
                            "gzip is \(Format.ratio(compress / encode)) the encoding; level 1: \(micro(compress1 / Double(pushes.count))) (\(Format.ratio(compress1 / encode)))"
                    ))
            } else {
                rows.append(
                    .init("  device CPU per push: JSON encoding only", median: micro(encode / Double(pushes.count)), note: "nothing compressed"))
            }
        }
        result.rows = rows
        result.check(
            "round trip", problems.isEmpty, problems.isEmpty ? "every compressed push inflates to exactly its JSON" : problems.joined(separator: "; ")
        )
        let judged = saved.filter(\.2)
        let worst = judged.min { $0.1 < $1.1 }
        result.check(
            "at least \(Format.percent(barSaved)) of the push bytes saved", !judged.isEmpty && judged.allSatisfy { $0.1 >= barSaved },
            (worst.map { "least saved: \(Format.percent($0.1)) (\($0.0)); " } ?? "no workload compressed; ")
                + "a workload under \(Format.bytes(threshold)) is sent as is and not judged")
        return result
    }

    static func micro(_ seconds: Double) -> String { Format.fixed(seconds * 1e6, 1) + " µs" }

    /// The median thread CPU time of `body` over ``repetitions`` runs.
    static func medianThreadCPU(_ body: () -> Void) -> Double {
        var samples = Samples()
        for _ in 0..<repetitions {
            let before = threadCPUSeconds()
            body()
            samples.append(threadCPUSeconds() - before)
        }
        return samples.median
    }

    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

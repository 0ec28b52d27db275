import ContractRuntime
import Contracts
import Foundation
import SampleServerApps
import SyncProtocol
import SyncServer

/// The quality bar (docs/PERFORMANCE.md): "gzip on pull pages: at least 70 % smaller".
///
/// Two kinds of page of 1 000 rows, each pulled from a fresh server (``SQLiteStorage`` in a
/// temporary folder), both judged:
///
/// - **content**: units, lessons (titles, descriptions, JSON bodies: reading, quiz, practice
///   steps) and asset metadata (SHA-256 checksums), published by an admin through
///   ``ContentService/publish(entity:row:identity:)``: what a learner's first sync downloads;
/// - **user**: a learner's `AssessmentResponse` rows (UUIDs, ULIDs, short answers,
///   timestamps), pushed through ``PushService``: the id-heavy end, the least compressible.
///
/// The bar is judged on the bytes the real server sends: the sync server runs on loopback
/// (``buildApplication``) and the page is fetched with `GET /sync/v1/pull?scope=…&limit=1000`,
/// once with `Accept-Encoding: gzip` and once without; the reduction is
/// 1 − gzip body / identity body. The identity body must equal the page as ``PullService``
/// writes it in process (``PullPage/json()``) and decode to what `PullService.pull` answers,
/// the gzip body must equal this benchmark's zlib call at the server's level, and it must
/// inflate back to the identity body.
///
/// Baseline in the same run, on the same bytes: zlib at level 1 (fastest), 6 (zlib's default)
/// and 9 (best) next to the server's level (``Gzip/responseLevel``, 4), with the time each
/// takes, so the figure reads as "what the level buys" as well as a percentage.
enum PullCompressionBenchmark {
    static let pageSize = 1000
    /// The bar: at least this share smaller.
    static let barReduction = 0.70
    /// Timed repetitions of the in-process steps, after one warm-up.
    static let runs = 11
    static let tenant = "bench-tenant"
    static let seed: UInt64 = 0x677a_6970_2d70_6167

    static let benchmark = Benchmark(
        name: "pull-compression",
        summary: "gzip of pull pages of \(Format.grouped(pageSize)) rows as the server sends them over HTTP (bar: at least 70 % smaller)",
        run: { try run() }
    )

    static let admin = DeviceIdentity(tenant: tenant, userID: "editor-1", deviceID: "cms", isAdmin: true, expiresAt: 4_102_444_800)
    static let learner = DeviceIdentity(tenant: tenant, userID: "learner-1", deviceID: "phone-1", expiresAt: 4_102_444_800)

    /// One kind of page and what was measured on it.
    struct Page {
        var name: String
        var scope: String
        var composition: String
        var json = Data()
        var wireIdentity = Data()
        var wireGzip = Data()
        /// The page as PullService answers it in process, for the cross-check with what HTTP sends.
        var pull = Samples()
        var encode = Samples()
        var sizes: [Int32: Int] = [:]
        var times: [Int32: Samples] = [:]
        var problems: [String] = []

        var reduction: Double { json.isEmpty || wireIdentity.isEmpty ? 0 : 1 - Double(wireGzip.count) / Double(wireIdentity.count) }

        func reduction(level: Int32) -> Double { 1 - Double(sizes[level] ?? 0) / Double(json.count) }
    }

    /// zlib's fastest, the server's, zlib's default and its best.
    static let levels: [Int32] = Array(Set([1, 4, 6, 9, Zlib.serverLevel])).sorted()

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let workspace = try TemporaryFolder("pull")
        defer { workspace.remove() }
        let storage = try SQLiteStorage(directory: workspace.url, contracts: ContractRegistry.self)
        let signer = try TokenSigner(secret: Data((0..<32).map { UInt8($0 * 7 + 3) }), source: "the benchmark")

        // 1. The data: content published by an admin, a learner's responses pushed by a device.
        let content = try runBlocking { try await publishContent(storage: storage) }
        let responses = try runBlocking { try await pushResponses(storage: storage) }

        var pages = [
            Page(name: "content", scope: "content", composition: content),
            Page(name: "user", scope: "user", composition: responses),
        ]

        // 2. In process: the page as PullService builds it and the server's encoder writes it,
        //    and zlib at three levels on those bytes.
        let pull = PullService(storage: storage)
        for index in pages.indices {
            let scope = pages[index].scope
            for run in 0...runs {
                let pulled = try Timing.measure {
                    try runBlocking {
                        do throws(ServiceError) {
                            return try await pull.page(scope: scope, cursor: nil, limit: pageSize, schema: [:], clientID: nil, identity: learner)
                        } catch {
                            throw BenchmarkError("the pull of '\(scope)' was refused (\(error.status)): \(error.detail.message)")
                        }
                    }
                }
                let page = pulled.value
                guard page.rowCount == pageSize, page.hasMore else {
                    throw BenchmarkError(
                        "the '\(scope)' page has \(page.rowCount) rows (has_more \(page.hasMore)); the benchmark needs a full page of \(pageSize)")
                }
                let encoded = Timing.measure { Data(page.json()) }
                if run > 0 {
                    pages[index].pull.append(pulled.seconds)
                    pages[index].encode.append(encoded.seconds)
                }
                pages[index].json = encoded.value
            }
            for level in levels {
                var samples = Samples()
                for run in 0...runs {
                    let compressed = Timing.measure { Gzip.compress(pages[index].json, level: level) }
                    if run > 0 { samples.append(compressed.seconds) }
                    pages[index].sizes[level] = compressed.value.count
                }
                pages[index].times[level] = samples
            }
        }

        // 3. The bar: the bytes the server sends, over loopback HTTP.
        let identity = signer.sign(learner)
        try withServer(storage: storage, signer: signer) { port in
            for index in pages.indices {
                let path = "/sync/v1/pull?scope=\(pages[index].scope)&limit=\(pageSize)"
                let plain = try LoopbackHTTP.get(port: port, path: path, headers: [("Authorization", "Bearer \(identity)")])
                let zipped = try LoopbackHTTP.get(
                    port: port, path: path, headers: [("Authorization", "Bearer \(identity)"), ("Accept-Encoding", "gzip")]
                )
                for (label, response) in [("identity", plain), ("gzip", zipped)] where response.status != 200 {
                    throw BenchmarkError(
                        "GET \(path) (\(label)) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))"
                    )
                }
                if plain.headers["content-encoding"] != nil {
                    pages[index].problems.append(
                        "the response without Accept-Encoding came with Content-Encoding \(plain.headers["content-encoding"]!)")
                }
                if zipped.headers["content-encoding"] != "gzip" {
                    pages[index].problems.append(
                        "the response to Accept-Encoding: gzip came with Content-Encoding \(zipped.headers["content-encoding"] ?? "none")")
                }
                pages[index].wireIdentity = plain.body
                pages[index].wireGzip = zipped.body
            }
        }

        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        for page in pages {
            result.fact("\(page.name) page", "\(Format.grouped(pageSize)) rows of scope '\(page.scope)': \(page.composition)")
        }
        result.fact("server", "sync server on 127.0.0.1 (buildApplication), SQLiteStorage in \(workspace.url.path); zlib \(Zlib.version)")
        result.fact("runs", "in-process steps: \(runs) timed after 1 warm-up; the HTTP responses once each")

        var rows: [BenchmarkResult.Row] = []
        for page in pages {
            let raw = page.wireIdentity.count
            rows.append(.init("\(page.name) page: JSON as served (identity)", median: Format.bytes(raw), note: "\(Format.grouped(raw)) B"))
            rows.append(
                .init(
                    "\(page.name) page: gzip as served", median: Format.bytes(page.wireGzip.count),
                    note: "\(Format.percent(page.reduction)) smaller (the bar: at least \(Format.percent(barReduction)))"
                ))
            for level in levels {
                let time = page.times[level]!
                let size = page.sizes[level]!
                let label =
                    switch level {
                    case Zlib.serverLevel: "  zlib level \(level) (the server's)" + (level == 1 ? ", fastest" : "")
                    case 1: "  baseline: zlib level 1 (fastest)"
                    case 4: "  baseline: zlib level 4"
                    case 6: "  baseline: zlib level 6 (zlib's default)"
                    default: "  baseline: zlib level \(level) (best)"
                    }
                rows.append(
                    .init(
                        "\(label): \(Format.bytes(size))", median: Format.duration(time.median), min: Format.duration(time.min),
                        note: "\(Format.percent(page.reduction(level: level))) smaller; "
                            + "\(Format.ratio(Double(size) / Double(page.sizes[Zlib.serverLevel]!))) the server's size"
                    ))
            }
            rows.append(
                .init(
                    "  for scale: PullService reads the page", median: Format.duration(page.pull.median), min: Format.duration(page.pull.min),
                    note: "\(Format.grouped(pageSize)) rows from SQLite, with their shaping plans"
                ))
            rows.append(
                .init(
                    "  for scale: the page's JSON written", median: Format.duration(page.encode.median), min: Format.duration(page.encode.min),
                    note: "PullPage.json(), as the server: rows shaped straight into sorted-key JSON"
                ))
        }
        result.rows = rows

        for page in pages {
            let passed = page.reduction >= barReduction
            result.check(
                "bar (\(page.name) page)", passed,
                "gzip of a pull page of \(Format.grouped(pageSize)) rows over HTTP: \(Format.bytes(page.wireIdentity.count)) → "
                    + "\(Format.bytes(page.wireGzip.count)), \(Format.percent(page.reduction)) smaller " + (passed ? ">=" : "<")
                    + " \(Format.percent(barReduction)) at level \(Zlib.serverLevel) (zlib level 4: \(Format.percent(page.reduction(level: 4))), "
                    + "level 6: \(Format.percent(page.reduction(level: 6))), level 9: "
                    + "\(Format.percent(page.reduction(level: 9))))"
            )
        }
        var sameJSON: [String] = []
        var sameGzip: [String] = []
        var roundTrip: [String] = []
        for page in pages {
            if page.wireIdentity != page.json {
                sameJSON.append("\(page.name): HTTP \(page.wireIdentity.count) B, in process \(page.json.count) B")
            }
            if page.wireGzip != Gzip.compress(page.json, level: Zlib.serverLevel) {
                sameGzip.append("\(page.name): HTTP \(page.wireGzip.count) B, zlib level \(Zlib.serverLevel) \(page.sizes[Zlib.serverLevel] ?? 0) B")
            }
            if (try? Gzip.decompress(page.wireGzip, limit: Int.max)) != page.wireIdentity { roundTrip.append(page.name) }
            sameJSON += page.problems
        }
        result.check(
            "as the server encodes", sameJSON.isEmpty,
            sameJSON.isEmpty
                ? "both identity bodies equal the page written in process (PullPage.json()), byte for byte, and decode to what "
                    + "PullService.pull answers (as JSONEncoder writes it)"
                : sameJSON.joined(separator: "; ")
        )
        result.check(
            "as the server gzips", sameGzip.isEmpty,
            sameGzip.isEmpty
                ? "both gzip bodies equal zlib deflateInit2(level \(Zlib.serverLevel), gzip wrapper) of those bytes, byte for byte"
                : sameGzip.joined(separator: "; ") + " (the in-process baselines may not describe what the server sends)"
        )
        result.check(
            "round trip", roundTrip.isEmpty,
            roundTrip.isEmpty
                ? "both gzip bodies inflate to the identity bodies" : "gzip bodies that do not inflate to the identity body: \(roundTrip)"
        )
        return result
    }

    // MARK: The server on loopback

    /// Runs the sync server on a free port of 127.0.0.1 while `body` runs, then stops it.
    static func withServer(
        storage: SQLiteStorage, signer: TokenSigner,
        configuration: ServerConfiguration = ServerConfiguration(host: "127.0.0.1", port: 0, rateLimit: nil), _ body: (Int) throws -> Void
    ) throws {
        // The application logs on standard output, in the middle of the tables: "Server
        // started" (info) and, when the task is cancelled to stop it, "Waiting on child channel:
        // CancellationError()" (error). A LOG_LEVEL already set is left as it is.
        setenv("LOG_LEVEL", "critical", 0)
        final class Port: @unchecked Sendable {
            private let lock = NSLock()
            private var value: Int?
            func set(_ port: Int?) { lock.withLock { value = port } }
            func get() -> Int? { lock.withLock { value } }
        }
        let port = Port()
        let app = buildApplication(
            configuration: configuration,
            environment: ServerEnvironment(storage: storage, signer: signer, apps: SampleServerApps.all),
            onServerRunning: { port.set($0 ?? -1) }
        )
        let server = Task { try await app.run() }
        defer {
            server.cancel()
            _ = try? runBlocking { _ = await server.result }
        }
        let deadline = Date().addingTimeInterval(30)
        while port.get() == nil, Date() < deadline { usleep(10_000) }
        guard let bound = port.get(), bound > 0 else { throw BenchmarkError("the sync server did not start listening on 127.0.0.1 within 30 s") }
        try body(bound)
    }

    // MARK: The data

    /// Words of the learning content (field service: batteries, scooters, safety). Titles and
    /// texts are drawn from them uniformly, which is harder on gzip than real prose.
    static let vocabulary: [String] = """
        battery pack cell charge charger voltage current fuse latch bay cover screw bolt torque wrench glove goggles helmet \
        scooter bike vehicle motor controller display throttle brake pad disc lever cable tyre tire valve pressure pump \
        wheel hub bearing frame fork stem handlebar kickstand light lamp reflector bell lock sensor firmware update reset \
        inspect check measure replace swap remove install tighten loosen clean wipe dry charge report log photograph record \
        confirm verify test ride park tow lift carry store label seal open close switch press hold release turn rotate \
        before after during while until when if unless because so then next first finally always never only also still \
        safe unsafe damaged swollen cracked hot warm cold wet dry loose tight worn new used spare faulty broken missing \
        the a an your its their this that these those each every any some all both either neither one two three four five \
        of in on at to from with without under over behind beside between through across along around into onto off \
        is are was were be been being has have had do does did can could should must may might will would shall \
        technician rider customer team depot van route shift warehouse workshop station dock street curb zone area city \
        minute minutes hour second seconds percent level status mode warning error fault code light signal tone sound \
        green amber red blue black white yellow grey orange left right front rear top bottom inner outer upper lower \
        step steps task tasks job order ticket incident issue note photo form checklist manual guide lesson unit quiz \
        learn practise practice review repeat read watch listen answer choose select explain describe name identify \
        correct wrong true false more less most least high low full empty half quarter normal abnormal expected unexpected
        """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)

    static func words(_ random: inout SeededGenerator, _ range: ClosedRange<Int>) -> String {
        (0..<random.int(in: range)).map { _ in random.pick(vocabulary) }.joined(separator: " ")
    }

    static func sentence(_ random: inout SeededGenerator, _ range: ClosedRange<Int> = 8...18) -> String {
        let text = words(&random, range)
        return text.prefix(1).uppercased() + text.dropFirst() + random.pick([".", ".", ".", "?", "!"])
    }

    static func title(_ random: inout SeededGenerator) -> String {
        let text = words(&random, 3...7)
        return text.prefix(1).uppercased() + text.dropFirst()
    }

    /// 80 units × 8 lessons × 1 asset each, published one row at a time as an admin would:
    /// 1 360 rows, so the first page of 1 000 holds all three kinds. Returns the composition.
    static func publishContent(storage: SQLiteStorage) async throws -> String {
        var ids = ULIDMaker(seed: seed)
        let service = ContentService(storage: storage, apps: SampleServerApps.all)
        let start = Timestamp(iso8601: "2025-11-03T09:00:00.000Z")!.millisecondsSince1970
        let kinds: [(String, Int)] = [("reading", 40), ("video", 15), ("audio", 10), ("quiz", 20), ("practice", 15)]
        var counts: [String: Int] = [:]
        func publish(_ entity: String, _ row: [String: JSONValue]) async throws {
            do throws(ServiceError) {
                _ = try await service.publish(entity: entity, row: .object(row), identity: admin)
            } catch {
                throw BenchmarkError("publishing \(entity) was refused (\(error.status)): \(error.detail.message)")
            }
            counts[entity, default: 0] += 1
        }
        for unitIndex in 0..<80 {
            let made = start + Int64(unitIndex) * 3_600_000
            let unitID = "unit-" + ids.make(milliseconds: made)
            var unit: [String: JSONValue] = [
                "id": .string(unitID), "title": .string(title(&ids.random)),
                "description": .string((0..<ids.random.int(in: 1...3)).map { _ in sentence(&ids.random) }.joined(separator: " ")),
                "learner_level": .string(ids.random.pick(["beginner", "intermediate", "advanced"])), "is_global": .bool(ids.random.chance(30)),
                "sort_index": .int(Int64(unitIndex)), "estimated_minutes": .int(Int64(ids.random.int(in: 10...90))),
                "tags": .array((0..<ids.random.int(in: 0...4)).map { _ in .string(ids.random.pick(vocabulary)) }),
            ]
            if ids.random.chance(10) { unit["estimated_minutes"] = JSONValue.null }
            try await publish(ContractRegistry.unit.name, unit)
            var lessonAssets: [(lesson: String, asset: String, kind: String)] = []
            for lessonIndex in 0..<8 {
                let lessonID = "lesson-" + ids.make(milliseconds: made + Int64(lessonIndex))
                let assetID = "asset-" + ids.make(milliseconds: made + Int64(lessonIndex))
                let kind = ids.random.weighted(kinds)
                let body: JSONValue
                switch kind {
                case "quiz":
                    body = .object([
                        "questions": .array(
                            (0..<ids.random.int(in: 2...5)).map { number in
                                .object([
                                    "id": .string("q\(number + 1)"), "prompt": .string(sentence(&ids.random, 6...14)),
                                    "choices": .array((0..<ids.random.int(in: 2...4)).map { _ in .string(title(&ids.random)) }),
                                    "answer": .int(Int64(ids.random.int(in: 0...1))),
                                ])
                            })
                    ])
                case "practice":
                    body = .object(["steps": .array((0..<ids.random.int(in: 3...6)).map { _ in .string(sentence(&ids.random, 4...10)) })])
                case "reading":
                    body = .object([
                        "format": .string("markdown"), "asset_id": .string(assetID), "summary": .string(sentence(&ids.random)),
                    ])
                default:
                    body = .object(["asset_id": .string(assetID), "captions": .bool(ids.random.chance(60))])
                }
                try await publish(
                    ContractRegistry.lesson.name,
                    [
                        "id": .string(lessonID), "unit_id": .string(unitID), "title": .string(title(&ids.random)),
                        "sort_index": .int(Int64(lessonIndex)), "lesson_kind": .string(kind), "body": body,
                        "duration_seconds": .int(Int64(ids.random.int(in: 60...1_200))),
                    ])
                lessonAssets.append((lessonID, assetID, kind))
            }
            for (lessonID, assetID, kind) in lessonAssets {
                let (assetKind, contentType): (String, String) =
                    switch kind {
                    case "video": ("video", "video/mp4")
                    case "audio": ("audio", "audio/mpeg")
                    case "reading": ("document", "text/markdown")
                    default: ("image", ids.random.pick(["image/png", "image/svg+xml", "image/jpeg"]))
                    }
                let checksum = ids.hex(64)
                var asset: [String: JSONValue] = [
                    "id": .string(assetID), "lesson_id": .string(lessonID), "asset_kind": .string(assetKind), "content_type": .string(contentType),
                    "size_bytes": .int(Int64(ids.random.int(in: 2_000...40_000_000))), "checksum": .string(checksum),
                    "storage_key": .string(checksum),
                ]
                if assetKind == "audio" || assetKind == "video" { asset["duration_ms"] = .int(Int64(ids.random.int(in: 20_000...900_000))) }
                try await publish(ContractRegistry.asset.name, asset)
            }
        }
        return "\(counts.keys.sorted().map { "\($0) \(Format.grouped(counts[$0]!))" }.joined(separator: ", ")) published "
            + "(first \(Format.grouped(pageSize)) in the page); ULID ids, word-drawn titles and texts, JSON lesson bodies, SHA-256 checksums"
    }

    /// One learner's answers: 50 attempts of 24 questions, 1 200 `AssessmentResponse` rows
    /// (last-writer-wins, so each carries an HLC) pushed in two pushes of 600.
    static func pushResponses(storage: SQLiteStorage) async throws -> String {
        var ids = ULIDMaker(seed: seed ^ 0x5555)
        let service = PushService(storage: storage, reducers: SampleServerApps.reducers)
        let entity = ContractRegistry.assessmentResponse
        let start = Timestamp(iso8601: "2026-01-12T14:00:00.000Z")!.millisecondsSince1970
        let assessments = (0..<10).map { _ in "assessment-" + ids.make(milliseconds: start - 86_400_000 * 60) }
        var clock = start
        var mutations: [Mutation] = []
        for _ in 0..<50 {
            let assessment = ids.random.pick(assessments)
            let attempt = ids.make(milliseconds: clock)
            for question in 1...24 {
                clock += Int64(ids.random.int(in: 4_000...90_000))
                let answer: JSONValue
                switch ids.random.int(in: 0...9) {
                case 0: answer = .null
                case 1...6: answer = .object(["choice": .int(Int64(ids.random.int(in: 0...3)))])
                case 7, 8: answer = .object(["choices": .array((0..<ids.random.int(in: 1...3)).map { _ in .int(Int64(ids.random.int(in: 0...4))) })])
                default: answer = .object(["text": .string(sentence(&ids.random, 3...12))])
                }
                let id = uuid(&ids.random)
                var payload: [String: JSONValue] = [
                    "id": .string(id), "assessment_id": .string(assessment), "attempt_id": .string(attempt),
                    "question_id": .string("q\(question)"), "answer": answer, "time_spent_ms": .int(Int64(ids.random.int(in: 2_000...120_000))),
                    "flagged_for_review": .bool(ids.random.chance(8)),
                ]
                if answer != .null { payload["answered_at"] = .string(Timestamp(millisecondsSince1970: clock).iso8601) }
                mutations.append(
                    Mutation(
                        seq: Int64(mutations.count + 1), clientMutationId: ids.make(milliseconds: clock), entity: entity.name, op: .create,
                        id: id, payload: .object(payload),
                        hlc: HybridLogicalClock(milliseconds: clock, counter: 0, node: learner.deviceID).description
                    ))
            }
        }
        var applied = 0
        for chunk in stride(from: 0, to: mutations.count, by: 600) {
            let request = PushRequest(
                clientId: "client-phone-1", schema: [entity.name: entity.currentVersion],
                mutations: Array(mutations[chunk..<min(chunk + 600, mutations.count)])
            )
            let response: PushResponse
            do throws(ServiceError) {
                response = try await service.push(request, identity: learner)
            } catch {
                throw BenchmarkError("pushing AssessmentResponse rows was refused (\(error.status)): \(error.detail.message)")
            }
            if let refused = response.results.first(where: { $0.status != .applied }) {
                throw BenchmarkError("AssessmentResponse seq \(refused.seq) was \(refused.status.rawValue): \(refused.error?.message ?? "")")
            }
            applied += response.results.count
        }
        return "\(Format.grouped(applied)) AssessmentResponse rows pushed by the learner's device (first \(Format.grouped(pageSize)) in the page); "
            + "UUID ids, ULID attempt ids, short JSON answers, timestamps"
    }

    /// A random (version 4) UUID in lowercase text.
    static func uuid(_ random: inout SeededGenerator) -> String {
        var bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }
}

import ContractRuntime
import Contracts
import Foundation
import SampleServerApps
import SyncProtocol
import SyncServer

/// The quality bar (docs/PERFORMANCE.md, issue 47): "changed fields only, on the pull: an
/// incremental sync where one small field of 1 000 large rows changed carries at most 20 % of
/// the bytes of the same sync with whole rows".
///
/// 1 000 units of about 3 KB each (title, a description of several sentences, up to 20 tags)
/// are published by an admin through ``ContentService``; a device pulls the scope to its end
/// and keeps the cursor. The admin then publishes every unit again with one small field
/// changed (`estimated_minutes`; the server stamps `updated_at`, the version field, with it).
/// The incremental sync from that cursor is fetched from the real server on loopback
/// (`GET /sync/v1/pull?scope=content&cursor=…&limit=1000`, every page to the last), four
/// times in the same run: whole rows and changed fields (`fields=changed`), each with
/// `Accept-Encoding: gzip` (what devices get) and without (the raw JSON). The bar is judged on
/// the gzip bodies; the raw ratio is reported beside it.
///
/// Checked as well: both syncs carry the same 1 000 rows; every row of the changed-fields sync
/// carries `_base_version` (the version at the cursor), the new `estimated_minutes` and no
/// `description`; each body inflates to the raw one of the same request.
enum ChangedFieldsBenchmark {
    static let rows = 1000
    /// The bar: the changed-fields sync's gzip bytes at most this share of the whole rows'.
    static let barShare = 0.20
    static let tenant = "bench-tenant"
    static let seed: UInt64 = 0x6368_616e_6765_6421

    static let benchmark = Benchmark(
        name: "changed-fields",
        summary:
            "bytes of an incremental sync where one small field of \(Format.grouped(rows)) large rows changed, whole rows vs changed fields (bar: at most 20 %)",
        run: { try run() }
    )

    static let admin = DeviceIdentity(tenant: tenant, userID: "editor-1", deviceID: "cms", isAdmin: true, expiresAt: 4_102_444_800)
    static let learner = DeviceIdentity(tenant: tenant, userID: "learner-1", deviceID: "phone-1", expiresAt: 4_102_444_800)

    /// What one way of syncing moved.
    struct Sync {
        var pages = 0
        var rows = 0
        var gzip = 0
        var raw = 0
        var bodies: [Data] = []
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let workspace = try TemporaryFolder("changed-fields")
        defer { workspace.remove() }
        let storage = try SQLiteStorage(directory: workspace.url, contracts: ContractRegistry.self)
        let signer = try TokenSigner(secret: Data((0..<32).map { UInt8($0 * 5 + 1) }), source: "the benchmark")
        let units = makeUnits()
        let rowBytes = units.map { CanonicalJSON.bytes(.object($0)).count }
        try runBlocking { try await publish(units, storage: storage) }

        let token = signer.sign(learner)
        var whole = Sync()
        var changed = Sync()
        var problems: [String] = []
        try PullCompressionBenchmark.withServer(storage: storage, signer: signer) { port in
            // The device's first sync: the scope to its end, whole rows.
            let cursor = try pullAll(port: port, token: token, cursor: nil, changedFields: false, gzip: true).cursor
            // One small field of every row changes.
            try runBlocking {
                try await publish(
                    units.map { unit in
                        var unit = unit
                        if case .int(let minutes)? = unit["estimated_minutes"] { unit["estimated_minutes"] = .int(minutes + 5) }
                        return unit
                    }, storage: storage)
            }
            for changedFields in [false, true] {
                let zipped = try pullAll(port: port, token: token, cursor: cursor, changedFields: changedFields, gzip: true)
                let plain = try pullAll(port: port, token: token, cursor: cursor, changedFields: changedFields, gzip: false)
                var sync = Sync(pages: plain.bodies.count, gzip: zipped.bytes, raw: plain.bytes, bodies: plain.bodies)
                for (index, body) in zipped.bodies.enumerated() where index < plain.bodies.count {
                    if (try? Gzip.decompress(body, limit: Int.max)) != plain.bodies[index] {
                        problems.append("a gzip page \(changedFields ? "of changed fields " : "")does not inflate to the raw page")
                    }
                }
                for body in plain.bodies {
                    let page = try PullResponse(json: body)
                    sync.rows += page.upserts["Unit"]?.count ?? 0
                    guard changedFields else { continue }
                    for case .object(let row) in page.upserts["Unit"] ?? [] {
                        if row["_base_version"] == nil || row["estimated_minutes"] == nil || row["description"] != nil {
                            problems.append("a row of the changed-fields sync is not one: \(row.keys.sorted())")
                            break
                        }
                    }
                }
                if changedFields { changed = sync } else { whole = sync }
            }
        }
        if whole.rows != rows || changed.rows != rows {
            problems.append("the syncs carry \(whole.rows) whole and \(changed.rows) changed rows, not \(rows) each")
        }

        let share = whole.gzip == 0 ? 1 : Double(changed.gzip) / Double(whole.gzip)
        let rawShare = whole.raw == 0 ? 1 : Double(changed.raw) / Double(whole.raw)
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "rows",
            "\(Format.grouped(rows)) units of scope 'content', \(Format.bytes(rowBytes.reduce(0, +) / rows)) each on average "
                + "(canonical JSON), published by an admin; then each published again with estimated_minutes + 5")
        result.fact("server", "sync server on 127.0.0.1 (buildApplication), SQLiteStorage in \(workspace.url.path); zlib \(Zlib.version)")
        result.fact("sync", "GET /sync/v1/pull?scope=content&cursor=<after the first sync>&limit=1000, every page, once each way")
        result.rows = [
            .init(
                "whole rows: gzip (as devices get it)", median: Format.bytes(whole.gzip),
                note: "\(Format.grouped(whole.gzip)) B in \(whole.pages) page(s)"),
            .init("whole rows: raw JSON", median: Format.bytes(whole.raw), note: "\(Format.grouped(whole.raw)) B"),
            .init(
                "changed fields: gzip (as devices get it)", median: Format.bytes(changed.gzip),
                note: "\(Format.grouped(changed.gzip)) B, \(Format.percent(share)) of whole rows' gzip"),
            .init(
                "changed fields: raw JSON", median: Format.bytes(changed.raw),
                note: "\(Format.grouped(changed.raw)) B, \(Format.percent(rawShare)) of whole rows' raw JSON"),
        ]
        result.check(
            "bar", share <= barShare,
            "changed fields \(Format.bytes(changed.gzip)) vs whole rows \(Format.bytes(whole.gzip)) gzip on the wire: "
                + "\(Format.percent(share)) \(share <= barShare ? "<=" : ">") \(Format.percent(barShare)) (raw JSON: \(Format.percent(rawShare)))")
        result.check(
            "the same sync", problems.isEmpty,
            problems.isEmpty
                ? "both carry the \(Format.grouped(rows)) changed rows; each changed-fields row has _base_version and the new "
                    + "estimated_minutes and no description; every gzip page inflates to its raw page"
                : problems.joined(separator: "; "))
        return result
    }

    /// Every page after `cursor`; the bytes of the bodies as received, and the last cursor.
    static func pullAll(port: Int, token: String, cursor: String?, changedFields: Bool, gzip: Bool) throws -> (
        cursor: String, bytes: Int, bodies: [Data]
    ) {
        var cursor = cursor
        var bytes = 0
        var bodies: [Data] = []
        while true {
            var path = "/sync/v1/pull?scope=content&limit=\(rows)"
            if let cursor { path += "&cursor=\(cursor)" }
            if changedFields { path += "&fields=changed" }
            var headers = [("Authorization", "Bearer \(token)")]
            if gzip { headers.append(("Accept-Encoding", "gzip")) }
            let response = try LoopbackHTTP.get(port: port, path: path, headers: headers)
            guard response.status == 200 else {
                throw BenchmarkError("GET \(path) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
            }
            bytes += response.body.count
            bodies.append(response.body)
            let plain = gzip ? try Gzip.decompress(response.body, limit: Int.max) : response.body
            let page = try PullResponse(json: plain)
            cursor = page.cursor
            if !page.hasMore { return (page.cursor, bytes, bodies) }
        }
    }

    /// 1 000 units of about 3 KB: a title, a description of sentences up to about 3 000
    /// characters, up to 20 tags.
    static func makeUnits() -> [[String: JSONValue]] {
        var ids = ULIDMaker(seed: seed)
        let start = Timestamp(iso8601: "2025-11-03T09:00:00.000Z")!.millisecondsSince1970
        return (0..<rows).map { index in
            var description = ""
            while description.count < 2_600 { description += PullCompressionBenchmark.sentence(&ids.random) + " " }
            return [
                "id": .string("unit-" + ids.make(milliseconds: start + Int64(index) * 60_000)),
                "title": .string(PullCompressionBenchmark.title(&ids.random)), "description": .string(String(description.prefix(3_000))),
                "learner_level": .string(ids.random.pick(["beginner", "intermediate", "advanced"])), "is_global": .bool(ids.random.chance(30)),
                "sort_index": .int(Int64(index)), "estimated_minutes": .int(Int64(ids.random.int(in: 10...90))),
                "tags": .array((0..<ids.random.int(in: 10...20)).map { _ in .string(ids.random.pick(PullCompressionBenchmark.vocabulary)) }),
            ]
        }
    }

    static func publish(_ units: [[String: JSONValue]], storage: SQLiteStorage) async throws {
        let service = ContentService(storage: storage, apps: SampleServerApps.all)
        for unit in units {
            do throws(ServiceError) {
                _ = try await service.publish(entity: ContractRegistry.unit.name, row: .object(unit), identity: admin)
            } catch {
                throw BenchmarkError("publishing a unit was refused (\(error.status)): \(error.detail.message)")
            }
        }
    }
}

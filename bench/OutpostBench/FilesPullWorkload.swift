import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol
import SyncServer

/// `files`, part 3: what a pull pays for rows that name files. Two teams' scopes on one SQLite
/// server hold ``rows`` IssueLogged 2 events each, alike field by field, the first team's with
/// `photo_file` naming a JPEG (a different file per row, with a name), the second's with it
/// null (written straight into the server's file; the `file_references` triggers record the
/// first team's files as a push would). In the same run, alternating:
///
/// - **server**: every page of the scope (``pageRows`` rows) through ``PullService`` as JSON, the
///   bytes the route sends;
/// - **device**: those pages (recorded once) read with `PullResponse(json:)` and applied with
///   `applyServerChanges` into a fresh store, which also records the files the rows name.
///
/// Bar: each within 1.1× (rows naming files against rows naming none; the median of the runs).
enum FilesPullWorkload {
    static let rows = 10_000
    static let pageRows = 500
    static let runs = 11
    static let bar = 1.1
    static let tenant = FilesDevice.tenant
    static let identity = DeviceIdentity(
        tenant: tenant, userID: FilesDevice.userID, deviceID: "phone-pull", teams: ["t-files", "t-plain", "t-padded"], expiresAt: 4_102_444_800)

    static func measure(workspace: TemporaryFolder, into result: inout BenchmarkResult) throws {
        let folder = try workspace.folder("pull")
        defer { workspace.remove(folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        try populate(folder.appendingPathComponent("server.sqlite"))
        let service = PullService(storage: storage, defaultLimit: pageRows, maximumLimit: pageRows)
        let schema = ["IssueLogged": 2]
        let teams: [Variant: String] = [.plain: "ops:team:t-plain", .files: "ops:team:t-files", .padded: "ops:team:t-padded"]

        var server: [Variant: Samples] = [:]
        var pages: [Variant: [[UInt8]]] = [:]
        for run in 0...runs {
            for variant in Variant.allCases {
                let (recorded, seconds) = try Timing.measure {
                    try runBlocking { try await pullAll(service, scope: teams[variant]!, schema: schema) }
                }
                if run == 0 { pages[variant] = recorded } else { server[variant, default: Samples()].append(seconds) }
            }
        }
        var device: [Variant: Samples] = [:]
        for run in 0...runs {
            for variant in Variant.allCases {
                let store = try FilesDevice.openStore(try workspace.folder("pull-device"))
                let key = teams[variant]!
                let (applied, seconds) = try Timing.measure { () throws -> Int in
                    var count = 0
                    for page in pages[variant]! {
                        let report = try store.applyServerChanges(ServerChanges(pull: try PullResponse(json: Data(page)), scopeKey: key))
                        count += report.upserted.values.reduce(0, +)
                    }
                    return count
                }
                try store.close()
                workspace.remove(workspace.url.appendingPathComponent("pull-device"))
                guard applied == rows else { throw BenchmarkError("the device applied \(applied) rows of \(rows)") }
                if run > 0 { device[variant, default: Samples()].append(seconds) }
            }
        }
        let bytes = Variant.allCases.map { variant in Format.bytes(pages[variant]!.reduce(0) { $0 + $1.count }) }
        result.fact(
            "pull",
            "\(Format.grouped(rows)) IssueLogged 2 rows per team scope, pages of \(pageRows), in process on SQLite: photo_file null, set "
                + "(a JPEG reference with a name), and null with the description longer by the reference's JSON (the same bytes without a file) "
                + "— \(bytes.joined(separator: ", ")) of JSON; \(runs) runs each, alternating")
        for (side, samples) in [("server: every page as JSON", server), ("device: pages parsed and applied", device)] {
            let plain = samples[.plain]!
            let files = samples[.files]!
            let padded = samples[.padded]!
            let ratio = files.median / plain.median
            result.rows.append(.init("\(side), photo_file null", median: Format.duration(plain.median), min: Format.duration(plain.min)))
            result.rows.append(
                .init(
                    "\(side), photo_file set", median: Format.duration(files.median), min: Format.duration(files.min),
                    note: "\(Format.ratio(ratio)) null; \(Format.ratio(files.median / padded.median)) the same bytes without a file"))
            result.rows.append(
                .init(
                    "\(side), null, same bytes", median: Format.duration(padded.median), min: Format.duration(padded.min),
                    note: "\(Format.ratio(padded.median / plain.median)) null"))
            result.check(
                "\(side.split(separator: ":")[0]) pull of rows naming files within \(Format.fixed(bar, 1))× the same rows without", ratio <= bar,
                "\(Format.ratio(ratio)) (\(Format.ratio(files.median / padded.median)) rows of the same bytes without a file)")
        }
    }

    /// The three team scopes' rows.
    enum Variant: CaseIterable {
        /// `photo_file` null.
        case plain
        /// `photo_file` naming a file.
        case files
        /// `photo_file` null, the description longer by the reference's JSON: the same bytes.
        case padded
    }

    static func pullAll(_ service: PullService, scope: String, schema: [String: Int]) async throws -> [[UInt8]] {
        var cursor: String?
        var pages: [[UInt8]] = []
        while true {
            let page = try await service.page(scope: scope, cursor: cursor, limit: pageRows, schema: schema, clientID: nil, identity: identity)
            pages.append(page.json())
            cursor = page.cursor
            if !page.hasMore { return pages }
        }
    }

    /// ``rows`` events in each team's scope, alike but for `photo_file`.
    static func populate(_ file: URL) throws {
        let queue = try DatabaseQueue(path: file.path)
        try queue.inTransaction { db in
            let insert = try db.makeStatement(
                sql: """
                    INSERT INTO issue_logged_events (_tenant_id, event_id, schema_version, user_id, device_id, occurred_at, recorded_at, hash,
                    team_id, service_asset_id, task_id, category, severity, description, photo, tags, latitude, longitude, observed_on, photo_file,
                    _scope_key, _seq) VALUES (?, ?, 2, ?, 'phone-1', 1769846400000, 1769846400500, ?, ?, ?, NULL, 'damage', 'high', ?, NULL,
                    '["brake","front"]', 52.52, 13.405, '2026-01-31', ?, ?, ?)
                    """)
            for (team, variant) in [("t-plain", Variant.plain), ("t-files", .files), ("t-padded", .padded)] {
                let scope = "ops:team:\(team)"
                for index in 0..<rows {
                    let hash = String(repeating: String(format: "%08x", index), count: 8)
                    let reference = CanonicalJSON.text(
                        try FileReference(sha256: hash, byteCount: Int64(800_000 + index), contentType: "image/jpeg", name: "photo-\(index).jpg").json
                    )
                    var description = "The brake lever of scooter \(index) is loose and the front light flickers when it goes over cobbles"
                    // Longer by the reference's JSON less the `null` a page writes for the field.
                    if variant == .padded { description += String(repeating: "x", count: reference.utf8.count - 4) }
                    try insert.execute(arguments: [
                        tenant, "\(team)-ev-\(index)", "tech-\(index % 20)", hash, team, "sa-\(index % 100)", description,
                        variant == .files ? reference : nil, scope, index + 1,
                    ])
                }
                try db.execute(
                    sql: "INSERT INTO scope_sequences (tenant, scope_key, last_seq) VALUES (?, ?, ?)", arguments: [tenant, scope, rows])
            }
            return .commit
        }
    }
}

import ContractRuntime
import Foundation
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sync that costs a phone little, with the real `sync-server` and `sync-device` binaries on
/// SQLite and PostgreSQL: a pull that brings only the fields another device changed, and
/// background windows (`sync --window`) that stop before their deadline and go on in the next
/// invocation, killed with SIGKILL at a window's end, losing nothing.
@Suite("End-to-end: changed fields and background windows", .serialized, .blockingWork)
struct BackgroundSyncStoryTests {
    /// Model details of a service asset: the bulk of its row, which a one-field change leaves alone.
    static let attributes =
        #"{"model":"CX-9000 field charger","firmware":"4.2.1","notes":""# + String(repeating: "Serviced per the manual; seals checked. ", count: 40)
        + #""}"#

    @Test("one device changes one field; the other pulls the row with only that field and ends with the same row", arguments: StorageKind.allCases)
    func changedFieldsPull(_ storage: StorageKind) async throws {
        let stage = try Stage(storage: storage)
        let ana = try stage.device("tablet-a", user: "op-ana", teams: [Stage.team])
        let ben = try stage.device("tablet-b", user: "op-ben", teams: [Stage.team])
        try ana.ok([
            "create", "service-asset", "--id", "charger-9", "--field", "asset_tag=CHG-9", "--field", "display_name=Charger 9", "--field",
            "category=charger", "--field", "battery_level=0.5", "--field", "attributes=\(Self.attributes)",
        ])
        try ana.ok(["sync"])
        let first = try ben.json(["sync"])
        #expect(first["result"].string == "succeeded")
        #expect(first["pulled"]["total"].int == 1)
        #expect(first["pulled"]["changed_fields_rows"].int == 0, "a row new to the device comes whole")

        // One small field changes on the other device.
        try ana.ok(["edit", "service-asset", "charger-9", "--field", "battery_level=0.9"])
        try ana.ok(["sync"])
        let second = try ben.json(["sync"])
        #expect(second["result"].string == "succeeded", "\(second)")
        #expect(second["pulled"]["total"].int == 1)
        #expect(second["pulled"]["changed_fields_rows"].int == 1, "the row came with only its changed fields: \(second)")

        // Ben's row is Ana's, field for field, and the server's.
        let onBen = try ben.json(["show", "service-asset", "charger-9"])
        let onAna = try ana.json(["show", "service-asset", "charger-9"])
        #expect(onBen["row"].value == onAna["row"].value)
        #expect(onBen["row"]["battery_level"].double == 0.9)
        #expect(onBen["row"]["display_name"].string == "Charger 9")
        #expect(onBen["row"]["attributes"]["model"].string == "CX-9000 field charger")
        #expect(onBen["unsynced_changes"].int == 0)
        #expect(onBen["server_version"].int == onAna["server_version"].int)
        try await stage.expectAgreement(ben)
        try await stage.expectAgreement(ana)
    }

    /// A window of 2.5 s on a link where each request waits 200 ms: requests start while they
    /// fit before the deadline less a 0.5 s margin, so a window holds about nine.
    static let window = ["sync", "--window", "2.5", "--window-margin", "0.5", "--request-estimate", "0.2", "--batch", "2", "--page-size", "2"]
    static let slowLink = ["OUTPOST_NETWORK_DELAY_MS": "200"]

    @Test(
        "a device with more work than one window finishes across several `sync --window` runs, killed at a window's end, losing nothing",
        arguments: StorageKind.allCases)
    func windowsAcrossInvocations(_ storage: StorageKind) async throws {
        let stage = try Stage(storage: storage)
        let tablet = try stage.device("tablet", user: "op-kim", teams: [Stage.team])
        let other = try stage.device("other", user: "op-lee", teams: [Stage.team])
        // The other device puts 12 assets on the server; the tablet queues 12 of its own: 6
        // pushes of 2, then 24 rows in pages of 2, about three windows of work.
        for index in 0..<12 {
            try other.ok([
                "create", "service-asset", "--id", "other-\(index)", "--field", "asset_tag=OTH-\(index)", "--field", "display_name=Other \(index)",
                "--field", "category=tool",
            ])
            try tablet.ok([
                "create", "service-asset", "--id", "mine-\(index)", "--field", "asset_tag=MINE-\(index)", "--field", "display_name=Mine \(index)",
                "--field", "category=battery",
            ])
        }
        try other.ok(["sync"])

        var windows = 0
        var kills = 0
        var finished = false
        var pushed = 0
        while !finished, windows < 15 {
            windows += 1
            let run = try tablet.start(Self.window + ["--json"], environment: Self.slowLink)
            if windows == 2 || windows == 3 {
                // Killed at the window's end: the process started (about 0.2 s), opened its store and
                // spent its window up to its last requests (admitted until 1.8 s in).
                Stopwatch.sleep(windows == 2 ? 1.8 : 2.0)
                if run.isRunning {
                    run.signal(SIGKILL)
                    kills += 1
                }
                _ = try run.wait()
                continue
            }
            let result = try run.wait(timeout: 60)
            #expect(result.status == 0, "\(result)")
            let report = try result.json()
            let window = report["window"]
            print("window \(windows) (\(storage.rawValue)): \(window)")
            #expect(window["took_seconds"].double.map { $0 < 2.5 } == true, "stopped before the deadline: \(window)")
            pushed += window["pushed"].int.map(Int.init) ?? 0
            finished = window["finished"].bool == true
            if windows == 1 {
                #expect(window["stopped_for_deadline"].bool == true, "more work than one window: \(report)")
                #expect(!finished)
                #expect((window["requests"].int ?? 0) >= 3, "\(window)")
                #expect((window["left"]["changes"].int ?? 0) > 0 || !window["left"]["scopes"].array.isEmpty, "\(window)")
            }
            if !finished { #expect(window["stopped_for_deadline"].bool == true, "\(report)") }
        }
        #expect(finished, "the work finished within \(windows) windows")
        #expect(windows >= 3, "more work than one window")
        #expect(kills >= 1, "a window was killed at its end")

        // Nothing lost: every change delivered, the tablet holds what the server holds, and the
        // other device gets the tablet's assets.
        let outbox = try tablet.json(["outbox", "--all"])
        let entries = outbox["entries"].array
        #expect(entries.count == 12)
        #expect(entries.allSatisfy { $0["status"].string == "done" }, "\(entries)")
        let assets = try tablet.json(["rows", "service-asset"])["rows"].array.compactMap { $0["row"]["id"].string }
        #expect((0..<12).allSatisfy { assets.contains("mine-\($0)") && assets.contains("other-\($0)") })
        try await stage.expectAgreement(tablet)
        try other.ok(["sync"])
        let theirs = try other.json(["rows", "service-asset"])["rows"].array.compactMap { $0["row"]["id"].string }
        #expect((0..<12).allSatisfy { theirs.contains("mine-\($0)") })
        try await stage.expectAgreement(other)
        if storage == .sqlite {
            // The server's ledger and audit log: each change applied exactly once.
            try await stage.stopAndExpectEveryWriteOnce(tablet)
        }
    }
}

import ContractRuntime
import Foundation
import InspectionContracts
import SyncClient
import SyncProtocol
import Testing

/// The site-inspection example end to end: its own server (`inspections-server`, a real process)
/// on each database, and two inspectors' tablets (`InspectionTablet`) with their own stores on
/// real SQLite files, syncing over loopback HTTP. Nothing here names the sample contracts: the engines are given the
/// example's registry and app, and that is all they know.
///
/// Inspector A's clock runs ahead of inspector B's, so where a policy asks which write is later,
/// A's is, whoever pushes first.
@Suite struct InspectionEndToEndTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09-21T14:13:20Z
    static let crew = InspectionServerProcess.crew
    static let reviewerNotes = "Compare the rail with the 2025 report before sign-off."

    /// An inspection's reviewer notes as the server holds them (the office's `GET` of the review).
    static func reviewerNotes(of inspection: String, on server: InspectionServerProcess, token: String) async throws -> String? {
        struct Review: Decodable { var reviewer_notes: String? }
        let answer = try await server.send("GET", "/api/v1/inspections/\(inspection)/review", token: token)
        #expect(answer.status == 200, "\(answer.body)")
        return try JSONDecoder().decode(Review.self, from: Data(answer.body.utf8)).reviewer_notes
    }

    /// Device A creates an inspection, its checklist and a finding; both devices then edit the
    /// same rows offline and record checks; after syncing, each policy has done its part and both
    /// devices hold the same rows, the server's progress included, and never the reviewer's notes.
    @Test(arguments: ServerDatabase.allCases)
    func twoInspectorsConvergeOnEveryPolicy(database: ServerDatabase) async throws {
        let server = try InspectionServerProcess(database)
        try server.start()
        defer { try? server.stop() }
        do {
            let a = try TestTablet(server, user: "inspector-a", device: "tablet-a", clock: ManualClock(Self.start.addingTimeInterval(60)))
            let b = try TestTablet(server, user: "inspector-b", device: "tablet-b", clock: ManualClock(Self.start))

            // A creates the inspection and its checklist; B receives them.
            let created = Timestamp(a.clock.now())
            try a.store.create(Inspection(id: "insp-1", teamId: Self.crew, siteName: "Pump station 4", updatedAt: created))
            for (index, label) in ["Fire extinguishers charged", "Emergency exits clear", "Guard rails fixed"].enumerated() {
                try a.store.create(
                    ChecklistItem(
                        id: "item-\(index + 1)", teamId: Self.crew, inspectionId: "insp-1", label: label, sortIndex: Int64(index + 1),
                        updatedAt: created
                    )
                )
            }
            try a.store.create(
                Finding(id: "finding-1", teamId: Self.crew, inspectionId: "insp-1", itemId: "item-3", title: "Loose guard rail", revision: 0)
            )
            await a.sync()
            await b.sync()
            #expect(try b.store.fetch(Inspection.self, id: "insp-1")?.siteName == "Pump station 4")
            #expect(try b.store.count(ChecklistItem.self) == 3)
            #expect(try b.store.fetch(Finding.self, id: "finding-1")?.severity == .medium)

            // The office reviews it: a server-only field, which no device is sent.
            let office = try server.token(user: "office", device: "console", admin: true, teams: [])
            let review = try await server.send(
                "PUT", "/api/v1/inspections/insp-1/review", token: office, body: #"{"reviewer_notes": "\#(Self.reviewerNotes)"}"#
            )
            #expect(review.status == 200)
            #expect(try await Self.reviewerNotes(of: "insp-1", on: server, token: office) == Self.reviewerNotes)
            let inspectorA = try server.token(user: "inspector-a", device: "tablet-a")
            let refused = try await server.send("PUT", "/api/v1/inspections/insp-1/review", token: inspectorA, body: "{}")
            #expect(refused.status == 403, "only the office (an admin token) reviews")
            let unknown = try await server.send("PUT", "/api/v1/inspections/insp-9/review", token: office, body: #"{"reviewer_notes": null}"#)
            #expect(unknown.status == 404)
            // The row devices see did not change: nothing new to pull.
            #expect(await b.engine.syncNow() == .succeeded(pushed: 0, pulled: 0))

            // Both go offline and edit the same rows; A's edits are the later ones by the clocks.
            a.clock.advance(by: 600)
            b.clock.advance(by: 300)
            try a.store.patch(Inspection.self, id: "insp-1", [.notes("Gate code 4711"), .siteAddress("1 Quay Road")])
            try b.store.patch(Inspection.self, id: "insp-1", [.status(.inProgress), .siteAddress("1 Quay Rd.")])
            try a.store.patch(ChecklistItem.self, id: "item-1", [.label("Fire extinguishers charged and tagged")])
            try b.store.patch(ChecklistItem.self, id: "item-1", [.label("Extinguishers charged")])
            try a.store.patch(Finding.self, id: "finding-1", [.severity(.critical), .correctiveAction("Replace the top bolt")])
            try b.store.patch(Finding.self, id: "finding-1", [.severity(.high), .description("The rail moves 3 cm at the top bolt")])
            // Checks: A passes item 1 and fails item 3, B passes item 2 (each by its own clock).
            let checkedByA = a.clock.now()
            try a.store.record(ItemChecked(teamId: Self.crew, inspectionId: "insp-1", itemId: "item-1", result: .pass))
            try a.store.record(
                ItemChecked(teamId: Self.crew, inspectionId: "insp-1", itemId: "item-3", result: .fail, note: "Top bolt loose")
            )
            try b.store.record(ItemChecked(teamId: Self.crew, inspectionId: "insp-1", itemId: "item-2", result: .pass))

            // A syncs first, then B.
            await a.sync()
            await b.sync()

            // last_writer_wins: B's label lost to A's later one, and B took the server's row at once.
            let lost = try b.store.conflicts(includeResolved: true)
            let itemConflict = try #require(lost.first { $0.entity == ChecklistItem.descriptor.name })
            #expect(itemConflict.serverResolution == "lost")
            #expect(itemConflict.resolution == .takeTheirs)
            #expect(try b.store.fetch(ChecklistItem.self, id: "item-1")?.label == "Fire extinguishers charged and tagged")

            // field_merge: B's status applied, its address (the field A changed later) kept as A's;
            // the push is applied as merged, so there is nothing to settle, and B holds the merge.
            #expect(!lost.contains { $0.entity == Inspection.descriptor.name })
            let mergedOnB = try #require(try b.store.fetch(Inspection.self, id: "insp-1"))
            #expect(mergedOnB.status == .inProgress)
            #expect(mergedOnB.siteAddress == "1 Quay Road")
            #expect(mergedOnB.notes == "Gate code 4711")

            // version_check: B's finding was based on a revision A had already moved on; B decides.
            let findingConflict = try #require(try b.store.conflicts().first)
            #expect(findingConflict.entity == Finding.descriptor.name)
            #expect(findingConflict.localRow?["description"] == .string("The rail moves 3 cm at the top bolt"))
            #expect(findingConflict.serverRow?["severity"] == .string("critical"))
            #expect(try b.store.fetch(Finding.self, id: "finding-1")?.severity == .high, "until resolved, B shows its own edit")
            #expect(await b.engine.currentStatus.conflicts == 1)
            // B merges: A's severity and corrective action, its own description.
            var merged = try #require(try b.store.fetch(Finding.self, id: "finding-1"))
            merged.severity = .critical
            merged.correctiveAction = "Replace the top bolt"
            try b.store.resolveConflict(findingConflict.id, merged: merged)
            await b.sync()
            await a.sync()

            // Both devices hold the same rows.
            for device in [a, b] {
                let inspection = try #require(try device.store.fetch(Inspection.self, id: "insp-1"))
                #expect(inspection.notes == "Gate code 4711")
                #expect(inspection.status == .inProgress)
                #expect(inspection.siteAddress == "1 Quay Road")
                // The reducer's progress: three items checked, one failed, the latest check A's.
                #expect(inspection.checkedCount == 3)
                #expect(inspection.failedCount == 1)
                #expect(inspection.lastCheckedAt == Timestamp(checkedByA))

                #expect(try device.store.fetch(ChecklistItem.self, id: "item-1")?.label == "Fire extinguishers charged and tagged")
                let finding = try #require(try device.store.fetch(Finding.self, id: "finding-1"))
                #expect(finding.severity == .critical)
                #expect(finding.description == "The rail moves 3 cm at the top bolt")
                #expect(finding.correctiveAction == "Replace the top bolt")
                #expect(finding.revision == 3, "the server's: created, A's edit, B's merge")

                #expect(try device.store.conflicts().isEmpty)
                #expect(await device.engine.currentStatus.pending == 0)
                #expect(try device.store.outboxCounts().needingAttention == 0)
            }
            #expect(try b.store.conflicts(includeResolved: true).first { $0.entity == Finding.descriptor.name }?.resolution == .merged)

            // The server kept the reviewer's notes through every push and fold, and sent them nowhere.
            #expect(try await Self.reviewerNotes(of: "insp-1", on: server, token: office) == Self.reviewerNotes)
            // The whole scope, as a new device pulls it from the start.
            let newDevice = try server.token(user: "inspector-b", device: "tablet-c")
            let pull = try await server.send("GET", "/sync/v1/pull?scope=crew&limit=500", token: newDevice)
            #expect(pull.status == 200)
            #expect(pull.body.contains("Pump station 4"))
            #expect(!pull.body.contains("reviewer_notes"))
            #expect(!pull.body.contains(Self.reviewerNotes))
        }
    }

    /// The reducer's verdict: a check of an item that is not on the inspection's checklist is
    /// refused with `row_not_found`, stored nowhere, and leaves the progress as it was.
    @Test func aCheckOfAnItemOffTheChecklistIsRejected() async throws {
        let server = try InspectionServerProcess(.sqlite)
        try server.start()
        defer { try? server.stop() }
        do {
            let a = try TestTablet(server, user: "inspector-a", device: "tablet-a", clock: ManualClock(Self.start))
            let created = Timestamp(a.clock.now())
            for id in ["insp-1", "insp-2"] {
                try a.store.create(Inspection(id: id, teamId: Self.crew, siteName: "Site \(id)", updatedAt: created))
            }
            try a.store.create(
                ChecklistItem(id: "item-1", teamId: Self.crew, inspectionId: "insp-1", label: "Gas valve closed", updatedAt: created)
            )
            await a.sync()

            try a.store.record(ItemChecked(teamId: Self.crew, inspectionId: "insp-2", itemId: "item-1", result: .fail))
            try a.store.record(ItemChecked(teamId: Self.crew, inspectionId: "insp-1", itemId: "item-1", result: .pass))
            await a.sync()

            let failed = try a.store.outboxEntries(statuses: [.failed])
            #expect(failed.map(\.entity) == [ItemChecked.descriptor.name])
            #expect(failed.first?.lastError?.code == .rowNotFound)
            #expect(try a.store.fetch(Inspection.self, id: "insp-2")?.checkedCount == 0)
            #expect(try a.store.fetch(Inspection.self, id: "insp-1")?.checkedCount == 1)
        }
    }
}

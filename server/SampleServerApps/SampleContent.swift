import ContractRuntime
import Contracts
import Foundation
import LearningServer
public import SyncServer

/// What ``SampleContent/seed(storage:tenant:team:clock:)`` did.
public struct SeedSummary: Sendable, Hashable, CustomStringConvertible {
    public var tenant: String
    public var team: String
    /// The sample's rows per contract name.
    public var rows: [String: Int]
    /// Rows written by this run (new, or changed since the last seed).
    public var written: Int
    /// Rows already stored as the sample has them.
    public var unchanged: Int
    /// Asset files in the store, and their total size.
    public var assetFiles: Int
    public var assetBytes: Int64

    public init(tenant: String, team: String, rows: [String: Int], written: Int, unchanged: Int, assetFiles: Int, assetBytes: Int64) {
        self.tenant = tenant
        self.team = team
        self.rows = rows
        self.written = written
        self.unchanged = unchanged
        self.assetFiles = assetFiles
        self.assetBytes = assetBytes
    }

    public var description: String {
        let counts = rows.keys.sorted().map { "\($0) \(rows[$0]!)" }.joined(separator: ", ")
        return "seeded tenant '\(tenant)', team '\(team)': \(counts); \(written) rows written, \(unchanged) unchanged; "
            + "\(assetFiles) asset files (\(assetBytes) bytes)"
    }
}

/// Sample data so a fresh server is useful at once: two units with lessons and real asset
/// files (Markdown, SVG, PNG, WAV), an assessment, and for one team two service assets, three
/// tasks and an incident.
///
/// Seeding is idempotent: rows already stored as the sample has them are left alone (no new
/// sequence number, no audit entry), files are stored by checksum.
public enum SampleContent {
    /// An asset file of the sample, stored before its `Asset` row is written.
    struct SampleAsset {
        var id: String
        var lessonID: String
        var kind: String
        var contentType: String
        var durationMs: Int64?
        var data: Data
    }

    /// Loads the sample into `tenant`, its team-scoped rows into `team`.
    public static func seed(
        storage: any ServerStorage, tenant: String, team: String, clock: any ServerClock
    ) async throws -> SeedSummary {
        var rows = contentRows()
        var assetBytes: Int64 = 0
        let identity = DeviceIdentity(tenant: tenant, userID: "sync-server", deviceID: "seed", teams: [team], isAdmin: true, expiresAt: 0)
        let content = ContentService(storage: storage, clock: clock, apps: SampleServerApps.all)
        let learning = LearningContentService(storage: storage, clock: clock, content: content)
        for file in sampleAssets() {
            // Each file is a file of the tenant (stored once by its SHA-256), named by the row's
            // `file`, with the version 1 fields beside it.
            var fields: [String: JSONValue]
            do {
                fields = try await learning.publishFile(file.data, assetID: file.id, contentType: file.contentType, identity: identity)
            } catch {
                throw SeedError(message: "the sample's file \(file.id) could not be stored: \(error.detail.message)")
            }
            assetBytes += Int64(file.data.count)
            fields["id"] = .string(file.id)
            fields["lesson_id"] = .string(file.lessonID)
            fields["asset_kind"] = .string(file.kind)
            if let duration = file.durationMs { fields["duration_ms"] = .int(duration) }
            rows.append(ContentService.ContentRow(entity: Asset.descriptor, fields: fields))
        }
        rows += teamRows(team: team)

        let written: Int
        do {
            written = try await content.publish(rows: rows, identity: identity)
        } catch {
            throw SeedError(message: "the sample does not fit the contracts: \(error.detail.message)")
        }
        var counts: [String: Int] = [:]
        for row in rows {
            counts[row.entity.name, default: 0] += 1
        }
        return SeedSummary(
            tenant: tenant, team: team, rows: counts, written: written, unchanged: rows.count - written,
            assetFiles: sampleAssets().count, assetBytes: assetBytes
        )
    }

    /// Why the sample could not be loaded (a sample out of step with the contracts).
    public struct SeedError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    // MARK: - The sample

    private static func text(_ value: String) -> JSONValue { .string(value) }

    /// Units, lessons and an assessment (the `content` scope).
    static func contentRows() -> [ContentService.ContentRow] {
        let unit = Unit.descriptor, lesson = Lesson.descriptor, assessment = Assessment.descriptor
        func lessonRow(_ id: String, unit: String, _ title: String, index: Int64, kind: String, seconds: Int64, body: JSONValue)
            -> ContentService.ContentRow
        {
            ContentService.ContentRow(
                entity: lesson,
                fields: [
                    "id": text(id), "unit_id": text(unit), "title": text(title), "sort_index": .int(index),
                    "lesson_kind": text(kind), "duration_seconds": .int(seconds), "body": body,
                ])
        }
        return [
            ContentService.ContentRow(
                entity: unit,
                fields: [
                    "id": text("unit-battery-basics"), "title": text("Battery swap basics"),
                    "description": text("How to swap a vehicle battery safely, read its charge and report a fault."),
                    "learner_level": text("beginner"), "is_global": .bool(true), "sort_index": .int(0), "estimated_minutes": .int(25),
                    "tags": .array([text("batteries"), text("safety")]),
                ]),
            lessonRow(
                "lesson-battery-safety", unit: "unit-battery-basics", "Before you touch a battery", index: 0, kind: "reading",
                seconds: 300, body: .object(["format": text("markdown"), "asset_id": text("asset-battery-safety-notes")])),
            lessonRow(
                "lesson-battery-anatomy", unit: "unit-battery-basics", "Anatomy of a battery pack", index: 1, kind: "reading",
                seconds: 240,
                body: .object(["format": text("figure"), "asset_ids": .array([text("asset-battery-diagram"), text("asset-battery-icon")])])),
            lessonRow(
                "lesson-battery-briefing", unit: "unit-battery-basics", "Spoken briefing", index: 2, kind: "audio",
                seconds: 2, body: .object(["asset_id": text("asset-battery-briefing")])),
            ContentService.ContentRow(
                entity: unit,
                fields: [
                    "id": text("unit-field-reporting"), "title": text("Reporting from the field"),
                    "description": text("Log issues with photos and keep incidents up to date while offline."),
                    "learner_level": text("intermediate"), "is_global": .bool(false), "sort_index": .int(1), "estimated_minutes": .int(15),
                    "tags": .array([text("incidents")]),
                ]),
            lessonRow(
                "lesson-reporting-offline", unit: "unit-field-reporting", "Working without a signal", index: 0, kind: "reading",
                seconds: 180, body: .object(["format": text("markdown"), "asset_id": text("asset-reporting-notes")])),
            lessonRow(
                "lesson-reporting-practice", unit: "unit-field-reporting", "Practice: log an issue", index: 1, kind: "practice",
                seconds: 120, body: .object(["steps": .array([text("Pick the vehicle"), text("Choose a category"), text("Describe what you see")])])),
            ContentService.ContentRow(
                entity: assessment,
                fields: [
                    "id": text("assessment-battery-basics"), "unit_id": text("unit-battery-basics"), "title": text("Battery swap check"),
                    "instructions": text("Answer all three questions; you need 2 of 3 to pass."),
                    "questions": .array([
                        .object([
                            "id": text("q1"), "prompt": text("What do you do before opening the battery bay?"),
                            "choices": .array([text("Switch the vehicle off"), text("Start the motor"), text("Nothing")]),
                        ]),
                        .object([
                            "id": text("q2"), "prompt": text("Which charge level means the battery must be swapped?"),
                            "choices": .array([text("Below 20 %"), text("Below 80 %"), text("Only at 0 %")]),
                        ]),
                        .object([
                            "id": text("q3"), "prompt": text("A swollen battery is…"),
                            "choices": .array([text("Reported as a safety issue"), text("Swapped as usual")]),
                        ]),
                    ]),
                    // Server-only: never in a pull page, a content answer or a device's table.
                    "answer_key": .array(["q1", "q2", "q3"].map { .object(["id": text($0), "correct": .int(0), "points": .int(1)]) }),
                    "question_count": .int(3), "pass_score": .double(0.66), "time_limit_seconds": .int(600),
                ]),
        ]
    }

    /// The sample's files.
    static func sampleAssets() -> [SampleAsset] {
        [
            SampleAsset(
                id: "asset-battery-safety-notes", lessonID: "lesson-battery-safety", kind: "document", contentType: "text/markdown",
                durationMs: nil,
                data: SampleFiles.markdown(
                    title: "Before you touch a battery",
                    paragraphs: [
                        "Switch the vehicle off and wait until the status light is dark.",
                        "Wear gloves. Check the pack for swelling, cracks or heat before you release the latch.",
                        "A damaged pack is never swapped: log a safety issue and leave the vehicle out of service.",
                    ])
            ),
            SampleAsset(
                id: "asset-battery-diagram", lessonID: "lesson-battery-anatomy", kind: "image", contentType: "image/svg+xml",
                durationMs: nil, data: SampleFiles.batteryDiagramSVG()
            ),
            SampleAsset(
                id: "asset-battery-icon", lessonID: "lesson-battery-anatomy", kind: "image", contentType: "image/png",
                durationMs: nil, data: SampleFiles.batteryIconPNG()
            ),
            SampleAsset(
                id: "asset-battery-briefing", lessonID: "lesson-battery-briefing", kind: "audio", contentType: "audio/wav",
                durationMs: 1500, data: SampleFiles.briefingWAV(milliseconds: 1500)
            ),
            SampleAsset(
                id: "asset-reporting-notes", lessonID: "lesson-reporting-offline", kind: "document", contentType: "text/markdown",
                durationMs: nil,
                data: SampleFiles.markdown(
                    title: "Working without a signal",
                    paragraphs: [
                        "Everything you record is saved on the device first and sent when the network returns.",
                        "The sync screen shows what is still waiting. Nothing is thrown away without asking you.",
                    ])
            ),
        ]
    }

    /// Service assets, tasks and an incident of one team (the `team` scope). Ids carry the team
    /// so that several teams can be seeded side by side.
    static func teamRows(team: String) -> [ContentService.ContentRow] {
        let serviceAsset = ServiceAsset.descriptor, task = FieldTask.descriptor, incident = Incident.descriptor
        let tag = team.uppercased()
        let vehicle = "\(team)-vehicle-017", battery = "\(team)-battery-204"
        func taskRow(_ suffix: String, _ title: String, kind: String, status: String, index: Int64, asset: String, checklist: [String])
            -> ContentService.ContentRow
        {
            ContentService.ContentRow(
                entity: task,
                fields: [
                    "id": text("\(team)-task-\(suffix)"), "team_id": text(team), "route_id": text("\(team)-route-north"),
                    "service_asset_id": text(asset), "title": text(title), "task_kind": text(kind), "status": text(status),
                    "sort_index": .int(index), "checklist": .array(checklist.map(text)), "estimated_minutes": .int(20),
                    "latitude": .double(52.5200), "longitude": .double(13.4050), "due_on": text("2026-02-02"),
                ])
        }
        return [
            ContentService.ContentRow(
                entity: serviceAsset,
                fields: [
                    "id": text(vehicle), "team_id": text(team), "asset_tag": text("\(tag)-V017"), "display_name": text("Scooter 17"),
                    "category": text("vehicle"), "status": text("needs_service"), "serial_number": text("SC-2291-017"),
                    "battery_level": .double(0.12), "latitude": .double(52.5200), "longitude": .double(13.4050),
                    "last_seen_at": text("2026-01-31T07:45:00.000Z"), "installed_on": text("2025-04-01"),
                    "attributes": .object(["model": text("Volt S2"), "color": text("teal")]),
                ]),
            ContentService.ContentRow(
                entity: serviceAsset,
                fields: [
                    "id": text(battery), "team_id": text(team), "asset_tag": text("\(tag)-B204"), "display_name": text("Battery pack 204"),
                    "category": text("battery"), "status": text("in_service"), "battery_level": .double(0.98),
                    "attributes": .object(["capacity_wh": .int(560)]),
                ]),
            taskRow(
                "swap-017", "Swap the battery of scooter 17", kind: "battery_swap", status: "assigned", index: 0, asset: vehicle,
                checklist: ["Switch off", "Check the pack", "Swap", "Confirm the charge"]),
            taskRow(
                "inspect-017", "Inspect the brakes of scooter 17", kind: "inspection", status: "assigned", index: 1, asset: vehicle,
                checklist: ["Front brake", "Rear brake"]),
            taskRow(
                "charge-204", "Bring battery 204 to the charger", kind: "relocation", status: "in_progress", index: 2, asset: battery,
                checklist: []),
            ContentService.ContentRow(
                entity: incident,
                fields: [
                    "id": text("\(team)-incident-0001"), "team_id": text(team), "number": text("INC-\(tag)-0001"),
                    "short_description": text("Scooter 17 reported with a low battery"),
                    "description": text("Customer report: the scooter stopped after 2 km."), "state": text("new"), "priority": text("moderate"),
                    "service_asset_id": text(vehicle), "reporter_name": text("Support desk"), "tags": .array([text("battery")]),
                    "opened_at": text("2026-01-31T07:50:00.000Z"),
                ]),
        ]
    }
}

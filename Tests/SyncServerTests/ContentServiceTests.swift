import ContractRuntime
import Contracts
import Crypto
import Foundation
import LearningAPI
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

@Suite("Content: units sync route, assets, admin publishing")
struct ContentServiceTests {
    let device = PullHarness.device()
    let base = "https://sync.example.com"

    func sync(
        _ harness: PullHarness, since: String? = nil, limit: Int? = nil, includeDeleted: Bool = true, schema: [String: Int] = [:]
    ) async throws -> UnitsSyncResponse {
        try await harness.content.unitsSync(
            since: since, limit: limit, includeDeleted: includeDeleted, schema: schema, identity: device, assetBaseURL: base
        )
    }

    @Test("units come whole: lessons by sort_index, each with its asset metadata and download URL", arguments: StorageKind.allCases)
    func unitsWithLessonsAndAssets(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)

        let page = try await sync(harness)
        #expect(page.units.compactMap(\.id) == ["unit-battery-basics", "unit-field-reporting"])
        #expect(page.tombstones.isEmpty && !page.hasMore)
        let unit = page.units[0]
        #expect(unit.schemaVersion == 3)
        #expect(unit.fields["title"] == .string("Battery swap basics"))
        #expect(unit.lessons.compactMap(\.id) == ["lesson-battery-safety", "lesson-battery-anatomy", "lesson-battery-briefing"])
        #expect(unit.lessons.map { $0.fields["sort_index"] } == [.int(0), .int(1), .int(2)])
        let anatomy = unit.lessons[1]
        #expect(anatomy.schemaVersion == 2)
        #expect(anatomy.assets.map(\.id) == ["asset-battery-diagram", "asset-battery-icon"])
        let icon = anatomy.assets[1]
        #expect(icon.type == "image" && icon.contentType == "image/png")
        #expect(icon.downloadURL == "https://sync.example.com/assets/asset-battery-icon")
        let file = try await harness.content.asset(id: icon.id, identity: device)
        #expect(file.file.sha256 == icon.checksum && file.file.contentType == "image/png")
        let bytes = try #require(try await harness.storage.storedFile(tenant: PullHarness.tenant, sha256: file.file.sha256))
        #expect(Int64(bytes.count) == icon.sizeBytes)
        #expect(Hex.sha256(bytes) == icon.checksum)
        let audio = unit.lessons[2].assets[0]
        #expect(audio.type == "audio" && audio.durationMs == 1500)

        // Nothing changed since: an empty page with the same cursor.
        let again = try await sync(harness, since: page.nextSince)
        #expect(again.units.isEmpty && again.tombstones.isEmpty && !again.hasMore)
        #expect(again.nextSince == page.nextSince)
    }

    @Test("a changed lesson or asset brings its unit back whole; deleted units come as tombstones when asked", arguments: StorageKind.allCases)
    func changesAndTombstones(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)
        let start = try await sync(harness)

        try await harness.publish("Lesson", PullHarness.lesson("lesson-reporting-extra", unit: "unit-field-reporting", index: 2))
        let lessonChange = try await sync(harness, since: start.nextSince)
        #expect(lessonChange.units.compactMap(\.id) == ["unit-field-reporting"])
        #expect(
            lessonChange.units[0].lessons.compactMap(\.id) == ["lesson-reporting-offline", "lesson-reporting-practice", "lesson-reporting-extra"])

        let newAudio = SampleFiles.briefingWAV(milliseconds: 10)
        _ = try await harness.content.uploadAsset(
            id: "asset-battery-briefing", data: newAudio, contentType: "audio/wav", identity: PullHarness.admin)
        let assetChange = try await sync(harness, since: lessonChange.nextSince)
        #expect(assetChange.units.compactMap(\.id) == ["unit-battery-basics"])
        let briefing = try #require(assetChange.units[0].lessons.first { $0.id == "lesson-battery-briefing" }?.assets.first)
        #expect(briefing.sizeBytes == Int64(newAudio.count))
        #expect(briefing.checksum == Hex.sha256(newAudio))

        // A deleted lesson disappears from its unit's list.
        try await harness.content.delete(entity: "Lesson", id: "lesson-reporting-extra", identity: PullHarness.admin)
        let lessonGone = try await sync(harness, since: assetChange.nextSince)
        #expect(lessonGone.units[0].lessons.compactMap(\.id) == ["lesson-reporting-offline", "lesson-reporting-practice"])

        try await harness.content.delete(entity: "Unit", id: "unit-field-reporting", identity: PullHarness.admin)
        let deleted = try await sync(harness, since: lessonGone.nextSince)
        #expect(deleted.units.isEmpty)
        #expect(deleted.tombstones.map(\.id) == ["unit-field-reporting"])
        #expect(deleted.tombstones[0].deletedAt.millisecondsSince1970 > 0)
        let quiet = try await sync(harness, since: lessonGone.nextSince, includeDeleted: false)
        #expect(quiet.units.isEmpty && quiet.tombstones.isEmpty)
        #expect(quiet.nextSince == deleted.nextSince)

        // From the start: the live unit only, and the tombstone.
        let fresh = try await sync(harness)
        #expect(fresh.units.compactMap(\.id) == ["unit-battery-basics"])
        #expect(fresh.tombstones.map(\.id) == ["unit-field-reporting"])
        // The deleted unit's asset is gone too.
        #expect(await pullErrorStatus { _ = try await harness.content.asset(id: "asset-reporting-notes", identity: device) } == 404)
    }

    @Test("limit bounds the units of a page; next_since continues without skipping", arguments: StorageKind.allCases)
    func paging(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        for index in 0..<7 {
            try await harness.publish("Unit", PullHarness.unit("u-\(index)", sortIndex: Int64(index)))
            for lesson in 0..<3 {
                try await harness.publish("Lesson", PullHarness.lesson("l-\(index)-\(lesson)", unit: "u-\(index)", index: Int64(lesson)))
            }
        }
        var seen: [String] = []
        var since: String?
        var pages = 0
        while true {
            let page = try await sync(harness, since: since, limit: 2)
            #expect(page.units.count <= 2)
            #expect(page.units.allSatisfy { $0.lessons.count == 3 })
            seen += page.units.compactMap(\.id)
            since = page.nextSince
            pages += 1
            if !page.hasMore { break }
        }
        #expect(seen == (0..<7).map { "u-\($0)" })
        #expect(pages == 4)
        #expect(await pullErrorStatus { _ = try await sync(harness, limit: 0) } == 400)
        #expect(await pullErrorStatus { _ = try await sync(harness, since: "garbage") } == 400)
        let clamped = try await sync(harness, limit: 100_000)
        #expect(clamped.units.count == 7)
    }

    @Test("units and lessons are shaped for the device; a too-old Unit schema gets 426", arguments: StorageKind.allCases)
    func shaping(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1", sortIndex: 5, minutes: 12))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0, seconds: 45))
        let old = try await sync(harness, schema: ["Unit": 2, "Lesson": 1])
        let unit = try #require(old.units.first)
        #expect(unit.schemaVersion == 2)
        #expect(unit.fields["position"] == .int(5))
        #expect(unit.fields["sort_index"] == nil && unit.fields["estimated_minutes"] == nil)
        #expect(unit.lessons.first?.schemaVersion == 1)
        #expect(unit.lessons.first?.fields["length_seconds"] == .int(45))

        let error = await pullError { _ = try await sync(harness, schema: ["Unit": 1]) }
        #expect(error?.status == 426)
        #expect(error?.detail.code == .schemaTooOld)
    }

    @Test("the response is snake_case JSON with fields, schema_version and nested lists side by side", arguments: StorageKind.allCases)
    func wireShape(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)
        let page = try await sync(harness)
        let data = try JSONEncoder().encode(page)
        let json = try JSONDecoder().decode(JSONValue.self, from: data)
        #expect(json.pullKeys == ["units", "tombstones", "next_since", "has_more"])
        guard case .array(let units)? = json.pullMember("units"), case .array(let lessons)? = units.first?.pullMember("lessons"),
            case .array(let assets)? = lessons.first?.pullMember("assets")
        else {
            Issue.record("units, lessons and assets must be arrays")
            return
        }
        #expect(
            units[0].pullKeys
                == ContractRegistry.unit.fields.map(\.name).reduce(into: Set(["schema_version", "lessons", "_server_version"])) { $0.insert($1) })
        #expect(lessons[0].pullKeys.isSuperset(of: ["id", "unit_id", "sort_index", "schema_version", "assets"]))
        #expect(assets[0].pullKeys == ["id", "lesson_id", "type", "content_type", "size_bytes", "checksum", "updated_at", "download_url"])
        // It reads back as the same value, and a unit decodes as the generated DTO.
        #expect(try JSONDecoder().decode(UnitsSyncResponse.self, from: data) == page)
        let unit = try JSONDecoder().decode(Contracts.Unit.self, from: JSONEncoder().encode(units[0]))
        #expect(unit.id == "unit-battery-basics")
    }

    @Test(
        "asset lookup: the live asset's file, a file of the tenant named by the row; 404 when unknown, deleted or not uploaded",
        arguments: StorageKind.allCases)
    func assetLookup(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)
        let file = try await harness.content.asset(id: "asset-battery-safety-notes", identity: device)
        // The asset's own type is kept in the row; its file, of a type the contract's `file` does
        // not take, is stored as application/octet-stream.
        #expect(file.contentType == "text/markdown" && file.file.contentType == "application/octet-stream")
        #expect(file.file.name == "asset-battery-safety-notes")
        let bytes = try #require(try await harness.storage.storedFile(tenant: PullHarness.tenant, sha256: file.file.sha256))
        #expect(file.file.byteCount == Int64(bytes.count))
        #expect(file.file.sha256 == SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("# Before you touch a battery"))

        #expect(await pullErrorStatus { _ = try await harness.content.asset(id: "nope", identity: device) } == 404)
        // Another tenant does not see it.
        #expect(
            await pullErrorStatus {
                _ = try await harness.content.asset(id: "asset-battery-safety-notes", identity: PullHarness.device(tenant: "globex"))
            } == 404)
        try await harness.content.delete(entity: "Asset", id: "asset-battery-safety-notes", identity: PullHarness.admin)
        #expect(await pullErrorStatus { _ = try await harness.content.asset(id: "asset-battery-safety-notes", identity: device) } == 404)

        // A row whose file was never uploaded.
        try await harness.publish(
            "Asset",
            .object([
                "id": .string("asset-pending"), "lesson_id": .string("lesson-battery-safety"), "asset_kind": .string("video"),
                "content_type": .string("video/mp4"), "size_bytes": .int(0), "checksum": .string(String(repeating: "0", count: 64)),
                "storage_key": .string("pending"),
            ]))
        #expect(await pullErrorStatus { _ = try await harness.content.asset(id: "asset-pending", identity: device) } == 404)
        // Bytes that are not what their type says are refused, as any file's are.
        #expect(
            await pullErrorStatus {
                _ = try await harness.content.uploadAsset(
                    id: "asset-pending", data: Data([0, 1, 2, 3]), contentType: "video/mp4", identity: PullHarness.admin)
            } == 422)
        let video = Data([0, 0, 0, 12]) + Data("ftypisom".utf8)
        let uploaded = try await harness.content.uploadAsset(id: "asset-pending", data: video, contentType: "video/mp4", identity: PullHarness.admin)
        #expect(uploaded.pullMember("size_bytes") == .int(12))
        #expect(uploaded.pullMember("checksum") == .string(Hex.sha256(video)))
        #expect(
            uploaded.pullMember("file")
                == .object([
                    "sha256": .string(Hex.sha256(video)), "size": .int(12), "content_type": .string("video/mp4"), "name": .string("asset-pending"),
                ]))
        #expect(try await harness.content.asset(id: "asset-pending", identity: device).file.byteCount == 12)
        // The file is counted among the tenant's files, uploaded by the admin who published it.
        #expect(try await harness.storage.storedFileHashes(tenant: PullHarness.tenant).contains(Hex.sha256(video)))
        // Uploading for an asset that has no row is refused.
        #expect(
            await pullErrorStatus {
                _ = try await harness.content.uploadAsset(id: "asset-missing", data: Data([1]), contentType: "image/png", identity: PullHarness.admin)
            } == 404)
    }

    @Test("admin publish and delete: versioned, sequenced, audited; devices get 403", arguments: StorageKind.allCases)
    func adminOperations(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let created = try await harness.publish("Unit", PullHarness.unit("u-1", title: "One"))
        #expect(created.pullMember("title") == .string("One"))
        #expect(created.pullMember("updated_at")?.pullText != nil)
        #expect(created.pullKeys == Set(ContractRegistry.unit.fields.map(\.name)))
        try await harness.publish("Unit", PullHarness.unit("u-1", title: "One, revised"))
        // Republishing the same content changes nothing.
        try await harness.publish("Unit", PullHarness.unit("u-1", title: "One, revised"))
        let stored = try #require(
            try await harness.storage.read { reader in
                try await reader.row(in: ContractTable(ContractRegistry.unit), tenant: PullHarness.tenant, id: "u-1")
            })
        #expect(stored.integer("_version") == 2)
        #expect(stored.integer("_seq") == 2)
        #expect(stored.text("_updated_by") == "editor")

        try await harness.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin)
        #expect(await pullErrorStatus { try await harness.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin) } == 404)
        #expect(await pullErrorStatus { try await harness.content.delete(entity: "Unit", id: "absent", identity: PullHarness.admin) } == 404)

        let entries = try await harness.storage.read { reader in try await reader.auditEntries(after: 0, limit: 100) }
        #expect(entries.map(\.outcome) == [.published, .published, .deleted])
        #expect(entries.allSatisfy { $0.entity == "Unit" && $0.rowID == "u-1" && $0.userID == "editor" })
        #expect(try await AuditChain.verify(harness.storage) == .intact(entries: 3, keyedFrom: 1))

        // Devices may do none of it.
        #expect(await pullErrorStatus { try await harness.publish("Unit", PullHarness.unit("u-2"), as: device) } == 403)
        #expect(await pullErrorStatus { try await harness.content.delete(entity: "Unit", id: "u-1", identity: device) } == 403)
        #expect(
            await pullErrorStatus {
                _ = try await harness.content.uploadAsset(id: "a-1", data: Data(), contentType: "image/png", identity: device)
            } == 403)
        let after = try await harness.storage.read { reader in try await reader.auditEntries(after: 0, limit: 100) }
        #expect(after.count == 3)
    }

    @Test("publishing validates against the contract and only in read-only scopes", arguments: StorageKind.allCases)
    func publishValidation(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        func refusal(_ entity: String, _ row: JSONValue) async -> ServiceError? {
            await pullError { try await harness.publish(entity, row) }
        }
        #expect(await refusal("Nope", PullHarness.unit("u-1"))?.status == 422)
        #expect(await refusal("Nope", PullHarness.unit("u-1"))?.detail.code == .unknownEntity)
        #expect(await refusal("Task", .object(["id": .string("t-1")]))?.detail.code == .notWritable)
        #expect(await refusal("IssueLogged", .object([:]))?.detail.code == .notWritable)

        var bad = PullHarness.unit("u-1")
        if case .object(var fields) = bad { fields["learner_level"] = .string("expert"); bad = .object(fields) }
        let invalid = await refusal("Unit", bad)
        #expect(invalid?.status == 422)
        #expect(invalid?.detail.code == .invalidPayload)
        #expect(invalid?.detail.details == .object(["field": .string("learner_level")]))

        #expect(await refusal("Unit", .object(["id": .string("u-1")]))?.detail.details == .object(["field": .string("title")]))
        #expect(
            await refusal(
                "Unit", .object(["id": .string("u-1"), "title": .string("T"), "learner_level": .string("beginner"), "colour": .string("red")]))?
                .detail.details == .object(["field": .string("colour")]))
        #expect(await refusal("Unit", .array([]))?.status == 422)
        #expect(await refusal("Unit", .object(["id": .string(""), "title": .string("T"), "learner_level": .string("beginner")]))?.status == 422)
        // An old field name is not the current contract.
        #expect(
            await refusal("Unit", .object(["id": .string("u-1"), "title": .string("T"), "learner_level": .string("beginner"), "position": .int(1)]))?
                .detail.details == .object(["field": .string("position")]))

        // A lesson cannot take the place of another live lesson of its unit.
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0))
        let taken = await refusal("Lesson", PullHarness.lesson("l-2", unit: "u-1", index: 0))
        #expect(taken?.status == 422)
        #expect(taken?.detail.message.contains("l-1") == true)
        // Once that lesson is deleted the place is free.
        try await harness.content.delete(entity: "Lesson", id: "l-1", identity: PullHarness.admin)
        try await harness.publish("Lesson", PullHarness.lesson("l-2", unit: "u-1", index: 1))

        let rows = try await harness.storage.read { reader in try await reader.auditEntries(after: 0, limit: 100) }
        #expect(rows.map(\.outcome) == [.published, .published, .deleted, .published])
    }

    @Test(
        "server-only fields are written under the scope's lock, checked and audited, without a new sequence or version",
        arguments: StorageKind.allCases)
    func serverOnlyFields(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)
        let content = harness.content.content
        let id = "assessment-battery-basics"
        let entity = Assessment.descriptor.name
        func stored() async throws -> StoredRow {
            try #require(try await harness.storage.snapshot { try await $0.row(of: Assessment.descriptor, tenant: PullHarness.tenant, id: id) })
        }
        func auditCount() async throws -> Int {
            try await harness.storage.read { try await $0.auditEntries(after: 0, limit: 100_000).count }
        }
        let before = try await stored()
        let auditBefore = try await auditCount()
        let key: JSONValue = .array([.object(["id": .string("q1"), "correct": .string("b"), "points": .int(2)])])

        let written = try await content.setServerOnlyFields(
            entity: entity, id: id, ["answer_key": key], identity: PullHarness.admin, operation: .publish)
        #expect(written["answer_key"] == key)
        let after = try await stored()
        #expect(after.text("answer_key") == CanonicalJSON.text(key))
        #expect(after.integer("_seq") == before.integer("_seq") && after.integer("_version") == before.integer("_version"))
        #expect(after.text("title") == before.text("title"))
        #expect(try await auditCount() == auditBefore + 1)
        // The same value again writes nothing, and audits nothing.
        try await content.setServerOnlyFields(entity: entity, id: id, ["answer_key": key], identity: PullHarness.admin, operation: .publish)
        #expect(try await auditCount() == auditBefore + 1)

        func refusal(_ values: [String: JSONValue], id: String = id, as identity: DeviceIdentity = PullHarness.admin) async -> ServiceError? {
            do {
                try await content.setServerOnlyFields(entity: entity, id: id, values, identity: identity, operation: .publish)
                return nil
            } catch { return error }
        }
        let notServerOnly = await refusal(["title": .string("Renamed")])
        #expect(notServerOnly?.status == 422 && notServerOnly?.detail.code == .notWritable)
        #expect(notServerOnly?.detail.details == JSONValue.object(["field": .string("title")]))
        let tooLarge = await refusal(["answer_key": .string(String(repeating: "a", count: 4 * 1024 * 1024))])
        #expect(tooLarge?.status == 422 && tooLarge?.detail.code == .valueTooLarge)
        #expect(await refusal(["answer_key": .null], id: "assessment-none")?.status == 404)
        #expect(await refusal(["answer_key": .null], as: device)?.status == 403)
        // Nothing refused was written.
        #expect(try await stored().text("answer_key") == CanonicalJSON.text(key))
        #expect(try await stored().text("title") == before.text("title"))
    }

    @Test(
        "asset files an older server kept in its own folder move into the tenant's files, the rows' file filled; a second run finds nothing",
        arguments: StorageKind.allCases)
    func upgradeOldAssetFolder(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("unit-old"))
        try await harness.publish("Lesson", PullHarness.lesson("lesson-old", unit: "unit-old", index: 0))
        // As an older server left them: the files by SHA-256 in `<data>/assets`, rows of version 1.
        let folder = harness.folder.appendingPathComponent("assets", isDirectory: true)
        let audio = SampleFiles.briefingWAV(milliseconds: 20)
        let notes = Data("# Old notes\n".utf8)
        for (id, data, type) in [("asset-old-audio", audio, "audio/wav"), ("asset-old-notes", notes, "text/markdown")] {
            let checksum = Hex.sha256(data)
            let shard = folder.appendingPathComponent(String(checksum.prefix(2)), isDirectory: true)
            try FileManager.default.createDirectory(at: shard, withIntermediateDirectories: true)
            try data.write(to: shard.appendingPathComponent(checksum))
            try await harness.publish(
                "Asset",
                .object([
                    "id": .string(id), "lesson_id": .string("lesson-old"), "asset_kind": .string("document"), "content_type": .string(type),
                    "size_bytes": .int(Int64(data.count)), "checksum": .string(checksum), "storage_key": .string(checksum),
                ]))
        }
        // A row whose file the folder never held stays as it is.
        try await harness.publish(
            "Asset",
            .object([
                "id": .string("asset-old-lost"), "lesson_id": .string("lesson-old"), "asset_kind": .string("video"),
                "content_type": .string("video/mp4"), "size_bytes": .int(3), "checksum": .string(String(repeating: "a", count: 64)),
                "storage_key": .string("lost"),
            ]))
        #expect(await pullErrorStatus { _ = try await harness.content.asset(id: "asset-old-audio", identity: device) } == 404)

        let upgrade = try await harness.content.upgradeStoredAssets(from: folder)
        #expect(upgrade.upgraded == 2 && upgrade.missing == 1)
        let moved = try await harness.content.asset(id: "asset-old-audio", identity: device)
        #expect(moved.file.sha256 == Hex.sha256(audio) && moved.file.contentType == "audio/wav" && moved.contentType == "audio/wav")
        #expect(try await harness.storage.storedFile(tenant: PullHarness.tenant, sha256: Hex.sha256(audio)) == audio)
        let document = try await harness.content.asset(id: "asset-old-notes", identity: device)
        #expect(document.contentType == "text/markdown" && document.file.contentType == "application/octet-stream")
        #expect(try await harness.storage.storedFile(tenant: PullHarness.tenant, sha256: Hex.sha256(notes)) == notes)
        // The old files are gone, and with them the folder.
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        // The moved files are audited with their hash, as any stored file is.
        let audited = try await harness.storage.read { reader in try await reader.auditEntries(after: 0, limit: 1000) }
        #expect(audited.filter { $0.entity == "file" }.map(\.rowID).sorted() == [Hex.sha256(audio), Hex.sha256(notes)].sorted())

        let again = try await harness.content.upgradeStoredAssets(from: folder)
        #expect(again.upgraded == 0 && again.missing == 0)
    }
}

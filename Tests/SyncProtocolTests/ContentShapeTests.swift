import ContractRuntime
import Contracts
import Foundation
import LearningAPI
import SyncProtocol
import Testing

/// `GET /api/v1/content/units/sync`: units with their lessons, tombstones and asset metadata.
@Suite("Content units sync wire shape")
struct ContentShapeTests {
    static let updatedAt = Timestamp(millisecondsSince1970: 1_769_846_400_000)  // 2026-01-31T08:00:00.000Z

    static let audioJSON = """
        {"id": "asset-1", "lesson_id": "lesson-1", "type": "audio", "content_type": "audio/wav",
         "size_bytes": 482133, "checksum": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
         "duration_ms": 31500, "updated_at": "2026-01-31T08:00:00.000Z", "download_url": "/assets/asset-1"}
        """

    static let audio = ContentAssetMetadata(
        id: "asset-1", lessonId: "lesson-1", type: "audio", contentType: "audio/wav", sizeBytes: 482_133,
        checksum: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", durationMs: 31_500,
        updatedAt: updatedAt, downloadURL: "/assets/asset-1"
    )

    static let image = ContentAssetMetadata(
        id: "asset-2", lessonId: "lesson-1", type: "image", contentType: "image/png", sizeBytes: 1_024,
        checksum: "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9", durationMs: nil,
        updatedAt: updatedAt, downloadURL: "https://cdn.example.com/assets/asset-2"
    )

    static let imageJSON = """
        {"id": "asset-2", "lesson_id": "lesson-1", "type": "image", "content_type": "image/png", "size_bytes": 1024,
         "checksum": "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
         "updated_at": "2026-01-31T08:00:00.000Z", "download_url": "https://cdn.example.com/assets/asset-2"}
        """

    static let lesson = SyncedLesson(
        fields: ["id": .string("lesson-1"), "unit_id": .string("unit-1"), "sort_index": .int(0), "title": .string("Halves")],
        schemaVersion: 2, assets: [audio, image]
    )

    static let lessonJSON = """
        {"id": "lesson-1", "unit_id": "unit-1", "sort_index": 0, "title": "Halves", "schema_version": 2,
         "assets": [\(audioJSON), \(imageJSON)]}
        """

    static let unit = SyncedUnit(
        fields: ["id": .string("unit-1"), "title": .string("Fractions"), "published": .bool(true), "summary": .null],
        schemaVersion: 3, lessons: [lesson]
    )

    static let unitJSON = """
        {"id": "unit-1", "title": "Fractions", "published": true, "summary": null, "schema_version": 3,
         "lessons": [\(lessonJSON)]}
        """

    static let responseJSON = """
        {"units": [\(unitJSON)],
         "tombstones": [{"id": "unit-9", "deleted_at": "2026-01-31T08:00:00.000Z"}],
         "next_since": "eyJrIjoiY29udGVudDpnbG9iYWwiLCJzIjo3LCJ2IjoxfQ",
         "has_more": false}
        """

    static let response = UnitsSyncResponse(
        units: [unit], tombstones: [ContentTombstone(id: "unit-9", deletedAt: updatedAt)],
        nextSince: "eyJrIjoiY29udGVudDpnbG9iYWwiLCJzIjo3LCJ2IjoxfQ", hasMore: false
    )

    // MARK: UnitsSyncResponse

    @Test("A page is units, tombstones, next_since and has_more")
    func response() throws {
        try expectWireShape(Self.response, is: Self.responseJSON)
        #expect(try WireJSON.keys(WireJSON.encoded(Self.response)) == ["units", "tombstones", "next_since", "has_more"])
    }

    @Test("An empty page still carries every key")
    func emptyResponse() throws {
        try expectWireShape(
            UnitsSyncResponse(units: [], tombstones: [], nextSince: "c", hasMore: false),
            is: #"{"units": [], "tombstones": [], "next_since": "c", "has_more": false}"#
        )
    }

    @Test("A page without a required key is refused", arguments: ["units", "tombstones", "next_since", "has_more"])
    func responseMissingKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: Self.responseJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(UnitsSyncResponse.self, from: literal) }
    }

    // MARK: Units and lessons

    @Test("A unit's contract fields sit next to schema_version and lessons, nulls kept")
    func unitIsFlat() throws {
        try expectWireShape(Self.unit, is: Self.unitJSON)
        #expect(Self.unit.id == "unit-1")
    }

    @Test("A lesson's contract fields sit next to schema_version and assets")
    func lessonIsFlat() throws {
        try expectWireShape(Self.lesson, is: Self.lessonJSON)
        #expect(Self.lesson.id == "lesson-1")
    }

    @Test("A unit without schema_version is version 1; without lessons it has none, written as []")
    func unitDefaults() throws {
        let unit = try WireJSON.decode(SyncedUnit.self, from: #"{"id": "unit-2", "title": "Decimals"}"#)
        #expect(unit == SyncedUnit(fields: ["id": .string("unit-2"), "title": .string("Decimals")], schemaVersion: 1, lessons: []))
        #expect(
            try WireJSON.encoded(unit)
                == WireJSON.canonical(#"{"id": "unit-2", "title": "Decimals", "schema_version": 1, "lessons": []}"#)
        )
        let lesson = try WireJSON.decode(SyncedLesson.self, from: #"{"id": "lesson-2"}"#)
        #expect(lesson == SyncedLesson(fields: ["id": .string("lesson-2")], schemaVersion: 1, assets: []))
    }

    @Test("A unit whose id is not text has no id")
    func idIsText() throws {
        #expect(SyncedUnit(fields: ["id": .int(7)], schemaVersion: 1, lessons: []).id == nil)
        #expect(SyncedLesson(fields: [:], schemaVersion: 1, assets: []).id == nil)
    }

    @Test("schema_version and the nested list are written from their properties, never from fields")
    func reservedKeysComeFromProperties() throws {
        let unit = SyncedUnit(
            fields: ["id": .string("unit-3"), "schema_version": .int(9), "lessons": .string("x")], schemaVersion: 3,
            lessons: []
        )
        #expect(
            try WireJSON.encoded(unit) == WireJSON.canonical(#"{"id": "unit-3", "schema_version": 3, "lessons": []}"#)
        )
        let lesson = SyncedLesson(fields: ["id": .string("l"), "assets": .int(1)], schemaVersion: 2, assets: [])
        #expect(try WireJSON.encoded(lesson) == WireJSON.canonical(#"{"id": "l", "schema_version": 2, "assets": []}"#))
    }

    @Test(
        "Wrongly typed reserved keys are refused",
        arguments: [
            #"{"id": "u", "schema_version": "3"}"#, #"{"id": "u", "schema_version": 2.5}"#, #"{"id": "u", "lessons": {}}"#,
            #"{"id": "u", "lessons": [{"id": "l", "assets": "none"}]}"#, #"["u"]"#,
        ])
    func wronglyTypedUnit(_ literal: String) throws {
        #expect(throws: DecodingError.self) { try WireJSON.decode(SyncedUnit.self, from: literal) }
    }

    // MARK: Assets and tombstones

    @Test("Asset metadata uses snake_case keys; duration_ms is absent when nil")
    func assetMetadata() throws {
        try expectWireShape(Self.audio, is: Self.audioJSON)
        try expectWireShape(Self.image, is: Self.imageJSON)
        #expect(
            try WireJSON.keys(WireJSON.encoded(Self.audio)) == [
                "id", "lesson_id", "type", "content_type", "size_bytes", "checksum", "duration_ms", "updated_at",
                "download_url",
            ]
        )
    }

    @Test(
        "Asset metadata without a required key is refused",
        arguments: ["id", "lesson_id", "type", "content_type", "size_bytes", "checksum", "updated_at", "download_url"]
    )
    func assetMissingKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: Self.audioJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(ContentAssetMetadata.self, from: literal) }
    }

    @Test("A tombstone is id and deleted_at")
    func tombstone() throws {
        try expectWireShape(
            ContentTombstone(id: "unit-9", deletedAt: Self.updatedAt),
            is: #"{"id": "unit-9", "deleted_at": "2026-01-31T08:00:00.000Z"}"#
        )
        #expect(throws: DecodingError.self) {
            try WireJSON.decode(ContentTombstone.self, from: #"{"id": "unit-9", "deleted_at": 1769846400000}"#)
        }
        #expect(throws: DecodingError.self) { try WireJSON.decode(ContentTombstone.self, from: #"{"id": "unit-9"}"#) }
    }
}

public import ContractRuntime
import Contracts

/// `GET /api/v1/content/units/sync?since=…&limit=…&include_deleted=…`: the units of the
/// content scope that changed since a cursor, each with its lessons and their asset metadata,
/// for the learning app.
///
/// ```json
/// {
///   "units": [{"id": "unit-1", "title": "…", "schema_version": 3,
///              "lessons": [{"id": "lesson-1", "sort_index": 0, "schema_version": 2,
///                           "assets": [{"id": "asset-1", "type": "audio", "download_url": "…", …}]}]}],
///   "tombstones": [{"id": "unit-9", "deleted_at": "2026-01-31T08:00:00.000Z"}],
///   "next_since": "eyJrIjoi…",
///   "has_more": false
/// }
/// ```
///
/// A unit is listed whole whenever it, one of its lessons or one of their assets changed, so a
/// device replaces the unit and its lesson list together. `next_since` is opaque: send it back
/// as `since` (absent on the first sync) until `has_more` is `false`.
public struct UnitsSyncResponse: Codable, Sendable, Hashable {
    /// Units changed since the cursor, latest state, in the order they changed.
    public var units: [SyncedUnit]
    /// Units deleted since the cursor (only when `include_deleted` was asked for).
    public var tombstones: [ContentTombstone]
    /// The cursor of the next request.
    public var nextSince: String
    /// Whether more changes remain after this page.
    public var hasMore: Bool

    public init(units: [SyncedUnit], tombstones: [ContentTombstone], nextSince: String, hasMore: Bool) {
        self.units = units
        self.tombstones = tombstones
        self.nextSince = nextSince
        self.hasMore = hasMore
    }

    enum CodingKeys: String, CodingKey {
        case units
        case tombstones
        case nextSince = "next_since"
        case hasMore = "has_more"
    }
}

/// A unit as the content route sends it: the `Unit` contract's fields shaped for the device's
/// schema version, plus `schema_version` and the nested `lessons`, all in one JSON object.
public struct SyncedUnit: Codable, Sendable, Hashable {
    /// The unit's wire fields (`id`, `title`, …) as the device's `Unit` version names them.
    public var fields: [String: JSONValue]
    /// The `Unit` schema version the fields are shaped for.
    public var schemaVersion: Int
    /// The unit's lessons, by `sort_index`.
    public var lessons: [SyncedLesson]

    public init(fields: [String: JSONValue], schemaVersion: Int, lessons: [SyncedLesson]) {
        self.fields = fields
        self.schemaVersion = schemaVersion
        self.lessons = lessons
    }

    /// The unit's primary key.
    public var id: String? {
        if case .string(let id)? = fields["id"] { return id }
        return nil
    }

    public init(from decoder: any Decoder) throws {
        var (fields, schemaVersion) = try NestedFields.decode(from: decoder)
        let container = try decoder.container(keyedBy: NestedFields.Key.self)
        lessons = try container.decodeIfPresent([SyncedLesson].self, forKey: NestedFields.Key("lessons")) ?? []
        fields["lessons"] = nil
        self.fields = fields
        self.schemaVersion = schemaVersion
    }

    public func encode(to encoder: any Encoder) throws {
        var container = try NestedFields.encode(fields, schemaVersion: schemaVersion, nestedKey: "lessons", to: encoder)
        try container.encode(lessons, forKey: NestedFields.Key("lessons"))
    }
}

/// A lesson as the content route sends it: the `Lesson` contract's fields shaped for the
/// device's schema version, plus `schema_version` and the metadata of its `assets`.
public struct SyncedLesson: Codable, Sendable, Hashable {
    /// The lesson's wire fields as the device's `Lesson` version names them.
    public var fields: [String: JSONValue]
    /// The `Lesson` schema version the fields are shaped for.
    public var schemaVersion: Int
    /// The files the lesson uses.
    public var assets: [ContentAssetMetadata]

    public init(fields: [String: JSONValue], schemaVersion: Int, assets: [ContentAssetMetadata]) {
        self.fields = fields
        self.schemaVersion = schemaVersion
        self.assets = assets
    }

    /// The lesson's primary key.
    public var id: String? {
        if case .string(let id)? = fields["id"] { return id }
        return nil
    }

    public init(from decoder: any Decoder) throws {
        var (fields, schemaVersion) = try NestedFields.decode(from: decoder)
        let container = try decoder.container(keyedBy: NestedFields.Key.self)
        assets = try container.decodeIfPresent([ContentAssetMetadata].self, forKey: NestedFields.Key("assets")) ?? []
        fields["assets"] = nil
        self.fields = fields
        self.schemaVersion = schemaVersion
    }

    public func encode(to encoder: any Encoder) throws {
        var container = try NestedFields.encode(fields, schemaVersion: schemaVersion, nestedKey: "assets", to: encoder)
        try container.encode(assets, forKey: NestedFields.Key("assets"))
    }
}

/// What a device needs to download, verify and file one asset of a lesson.
public struct ContentAssetMetadata: Codable, Sendable, Hashable {
    public var id: String
    public var lessonId: String
    /// `audio`, `image`, `video` or `document`.
    public var type: String
    /// The MIME type, for example `audio/wav`.
    public var contentType: String
    /// The file's size in bytes.
    public var sizeBytes: Int64
    /// Lower-case hex SHA-256 of the file: verify the download against it (it is also the
    /// `ETag` of the asset route).
    public var checksum: String
    public var durationMs: Int64?
    public var updatedAt: Timestamp
    /// Where to download it (`GET`, resumable with `Range`).
    public var downloadURL: String

    public init(
        id: String, lessonId: String, type: String, contentType: String, sizeBytes: Int64, checksum: String,
        durationMs: Int64?, updatedAt: Timestamp, downloadURL: String
    ) {
        self.id = id
        self.lessonId = lessonId
        self.type = type
        self.contentType = contentType
        self.sizeBytes = sizeBytes
        self.checksum = checksum
        self.durationMs = durationMs
        self.updatedAt = updatedAt
        self.downloadURL = downloadURL
    }

    enum CodingKeys: String, CodingKey {
        case id
        case lessonId = "lesson_id"
        case type
        case contentType = "content_type"
        case sizeBytes = "size_bytes"
        case checksum
        case durationMs = "duration_ms"
        case updatedAt = "updated_at"
        case downloadURL = "download_url"
    }
}

/// A unit deleted on the server: the device removes it with its lessons and files.
public struct ContentTombstone: Codable, Sendable, Hashable {
    public var id: String
    public var deletedAt: Timestamp

    public init(id: String, deletedAt: Timestamp) {
        self.id = id
        self.deletedAt = deletedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case deletedAt = "deleted_at"
    }
}

/// Coding of an object whose contract fields sit next to `schema_version` and a nested list.
enum NestedFields {
    struct Key: CodingKey, Hashable {
        var stringValue: String
        var intValue: Int? { nil }

        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static let schemaVersionKey = Key("schema_version")

    /// Every member except `schema_version` (the nested list included; the caller removes it),
    /// and `schema_version` (1 when absent, as for rows written before versions existed).
    static func decode(from decoder: any Decoder) throws -> (fields: [String: JSONValue], schemaVersion: Int) {
        let container = try decoder.container(keyedBy: Key.self)
        var fields: [String: JSONValue] = [:]
        for key in container.allKeys where key != schemaVersionKey {
            fields[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
        }
        let schemaVersion = try container.decodeIfPresent(Int.self, forKey: schemaVersionKey) ?? 1
        return (fields, schemaVersion)
    }

    /// Writes the fields and `schema_version`; a field named like the nested list is left for it.
    static func encode(
        _ fields: [String: JSONValue], schemaVersion: Int, nestedKey: String, to encoder: any Encoder
    ) throws -> KeyedEncodingContainer<Key> {
        var container = encoder.container(keyedBy: Key.self)
        for name in fields.keys.sorted() where name != nestedKey && name != schemaVersionKey.stringValue {
            try container.encode(fields[name]!, forKey: Key(name))
        }
        try container.encode(schemaVersion, forKey: schemaVersionKey)
        return container
    }
}

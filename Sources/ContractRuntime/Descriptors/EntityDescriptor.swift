/// Everything client and server need to know about an entity, read instead of hard-coded.
public struct EntityDescriptor: Hashable, Sendable {
    /// The contract's name, as the wire and the registry name it.
    public var name: String
    /// The generated Swift type's name.
    public var swiftName: String
    /// The contract's one-line summary.
    public var summary: String
    /// The table its rows are stored in, on devices and on the server.
    public var table: String
    /// The name of the scope it syncs in.
    public var scope: String
    /// Which way its rows travel.
    public var direction: SyncDirection
    /// How the server settles two writes of the same row.
    public var conflict: ConflictPolicy
    /// Whether a deletion leaves a tombstone that devices pull.
    public var tombstones: Bool
    /// How long a device keeps synced rows, in seconds; `nil` for as long as they exist.
    public var retentionSeconds: Int?
    /// How early its rows sync against other contracts'.
    public var priority: SyncPriority
    /// The most rows a device keeps (the sync block's `max_rows`); `nil`: no limit of the
    /// contract's own. The device's defaults, which the app may override (SyncClient's
    /// `StorageLimits`).
    public var maxRows: Int?
    /// The largest row a device keeps, in bytes as stored (the sync block's `max_row_bytes`);
    /// `nil`: no limit. A cache limit the app may change, not the write limit (``maxBytes``).
    public var maxRowBytes: Int?
    /// The largest row a writer may store, in bytes as stored (`RowSize/storedBytes(of:)`):
    /// the contract's `max_bytes`, else `RowSize/defaultMaximumBytes(fields:)`. Devices and
    /// the server refuse a larger write.
    public var maxBytes: Int
    /// The current version of its schema.
    public var currentVersion: Int
    /// The oldest schema version devices may still run.
    public var oldestSupported: Int
    /// The primary key field's name.
    public var primaryKey: String
    /// The version field's name, if the entity has one.
    public var versionField: String?
    /// Synced fields, in contract order.
    public var fields: [FieldDescriptor]
    /// Client-only fields.
    public var localFields: [FieldDescriptor]
    /// Its relations to other entities.
    public var relations: [RelationDescriptor]
    /// The indexes on its table.
    public var indexes: [IndexDescriptor]
    /// For every supported schema version, the fields a device at that version knows, from the
    /// contract's released history: what the server sends an older device, under which names.
    public var knownFieldsByVersion: [Int: [KnownField]]
    /// Fields only the server holds (`server_only`): in its table, never in ``fields``, a DTO,
    /// a device's table, a pull page or a content answer.
    public var serverOnlyFields: [FieldDescriptor]
    /// Whether each write must carry its device's signature (the contract's `signed: true`,
    /// append-only entities only): the server refuses one without a valid signature from the
    /// key its device registered.
    public var isSigned: Bool

    /// A descriptor from its parts, as generated code writes it.
    public init(
        name: String, swiftName: String, summary: String, table: String, scope: String, direction: SyncDirection,
        conflict: ConflictPolicy, tombstones: Bool, retentionSeconds: Int?, priority: SyncPriority, maxRows: Int? = nil,
        maxRowBytes: Int? = nil, maxBytes: Int? = nil, isSigned: Bool = false, currentVersion: Int,
        oldestSupported: Int, primaryKey: String, versionField: String?, fields: [FieldDescriptor],
        localFields: [FieldDescriptor], relations: [RelationDescriptor], indexes: [IndexDescriptor],
        knownFieldsByVersion: [Int: [KnownField]] = [:], serverOnlyFields: [FieldDescriptor] = []
    ) {
        // Generated code passes only a written `max_bytes`; the server-only fields count, as
        // the server stores them in the same row.
        self.maxBytes = maxBytes ?? RowSize.defaultMaximumBytes(fields: fields + serverOnlyFields)
        self.knownFieldsByVersion = knownFieldsByVersion
        self.serverOnlyFields = serverOnlyFields
        self.isSigned = isSigned
        self.name = name
        self.swiftName = swiftName
        self.summary = summary
        self.table = table
        self.scope = scope
        self.direction = direction
        self.conflict = conflict
        self.tombstones = tombstones
        self.retentionSeconds = retentionSeconds
        self.priority = priority
        self.maxRows = maxRows
        self.maxRowBytes = maxRowBytes
        self.currentVersion = currentVersion
        self.oldestSupported = oldestSupported
        self.primaryKey = primaryKey
        self.versionField = versionField
        self.fields = fields
        self.localFields = localFields
        self.relations = relations
        self.indexes = indexes
    }

    /// The field with the given name, synced or local, if there is one.
    public func field(named name: String) -> FieldDescriptor? {
        fields.first { $0.name == name } ?? localFields.first { $0.name == name }
    }

    /// Whether a device at `version` can sync this entity.
    public func support(forSchemaVersion version: Int) -> SchemaSupport {
        version < oldestSupported ? .tooOld : version > currentVersion ? .tooNew : .supported
    }

    /// The fields a device at `version` knows, or `nil` when that version is not supported.
    public func knownFields(forSchemaVersion version: Int) -> [KnownField]? {
        support(forSchemaVersion: version) == .supported ? knownFieldsByVersion[version] : nil
    }
}

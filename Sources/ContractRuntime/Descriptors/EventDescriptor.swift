/// Everything client and server need to know about an event.
public struct EventDescriptor: Hashable, Sendable {
    /// The contract's name, as the wire and the registry name it.
    public var name: String
    /// The generated Swift type's name.
    public var swiftName: String
    /// The contract's one-line summary.
    public var summary: String
    /// The table its events are stored in.
    public var table: String
    /// The name of the scope it syncs in.
    public var scope: String
    /// Which way its events travel.
    public var direction: SyncDirection
    /// The current version of its schema.
    public var currentVersion: Int
    /// The oldest schema version devices may still run.
    public var oldestSupported: Int
    /// The entity the server folds this event into, if any.
    public var appliesTo: String?
    /// The largest row a writer may store, in bytes as stored (`RowSize/storedBytes(of:)`):
    /// the contract's `max_bytes`, else `RowSize/defaultMaximumBytes(fields:)`. Devices and
    /// the server refuse a larger write.
    public var maxBytes: Int
    /// Its payload fields, in the order written.
    public var fields: [FieldDescriptor]
    /// For every supported schema version, the fields a device at that version sends, and the
    /// current field each one maps to.
    public var knownFieldsByVersion: [Int: [KnownField]]
    /// Whether each event must carry its device's signature (the contract's `signed: true`):
    /// the server refuses one without a valid signature from the key its device registered.
    public var isSigned: Bool

    /// A descriptor from its parts, as generated code writes it.
    public init(
        name: String, swiftName: String, summary: String, table: String, scope: String, direction: SyncDirection,
        currentVersion: Int, oldestSupported: Int, appliesTo: String?, maxBytes: Int? = nil, isSigned: Bool = false,
        fields: [FieldDescriptor], knownFieldsByVersion: [Int: [KnownField]] = [:]
    ) {
        self.isSigned = isSigned
        // Generated code passes only a written `max_bytes`.
        self.maxBytes = maxBytes ?? RowSize.defaultMaximumBytes(fields: fields)
        self.knownFieldsByVersion = knownFieldsByVersion
        self.name = name
        self.swiftName = swiftName
        self.summary = summary
        self.table = table
        self.scope = scope
        self.direction = direction
        self.currentVersion = currentVersion
        self.oldestSupported = oldestSupported
        self.appliesTo = appliesTo
        self.fields = fields
    }

    /// The payload field with the given name, if there is one.
    public func field(named name: String) -> FieldDescriptor? { fields.first { $0.name == name } }

    /// Whether a device at `version` can send this event.
    public func support(forSchemaVersion version: Int) -> SchemaSupport {
        version < oldestSupported ? .tooOld : version > currentVersion ? .tooNew : .supported
    }

    /// The fields a device at `version` sends, or `nil` when that version is not supported.
    public func knownFields(forSchemaVersion version: Int) -> [KnownField]? {
        support(forSchemaVersion: version) == .supported ? knownFieldsByVersion[version] : nil
    }
}

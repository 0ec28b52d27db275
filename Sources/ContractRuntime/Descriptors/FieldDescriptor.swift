/// One field of a contract.
public struct FieldDescriptor: Hashable, Sendable {
    /// The wire key and column name.
    public var name: String
    public var kind: FieldKind
    public var isOptional: Bool
    /// The default as it appears on the wire, if any.
    public var defaultValue: JSONValue?
    /// The contract version that added the field.
    public var since: Int
    /// The field's previous name, if it was renamed.
    public var renamedFrom: String?
    /// The first version that uses the current name, when renamed.
    public var renamedInVersion: Int?
    /// Why the field is deprecated, if it is.
    public var deprecation: String?
    /// Stored sealed on the device.
    public var isEncrypted: Bool
    public var maxLength: Int?
    public var isPrimaryKey: Bool
    public var isVersionField: Bool
    /// A client-only column: never on the wire, never on the server.
    public var isLocal: Bool

    public init(
        name: String, kind: FieldKind, isOptional: Bool = false, defaultValue: JSONValue? = nil, since: Int = 1,
        renamedFrom: String? = nil, renamedInVersion: Int? = nil, deprecation: String? = nil, isEncrypted: Bool = false,
        maxLength: Int? = nil, isPrimaryKey: Bool = false, isVersionField: Bool = false, isLocal: Bool = false
    ) {
        self.name = name
        self.kind = kind
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.since = since
        self.renamedFrom = renamedFrom
        self.renamedInVersion = renamedInVersion
        self.deprecation = deprecation
        self.isEncrypted = isEncrypted
        self.maxLength = maxLength
        self.isPrimaryKey = isPrimaryKey
        self.isVersionField = isVersionField
        self.isLocal = isLocal
    }

    /// The key this field has on the wire for a device running `schemaVersion`, or `nil` when
    /// that version does not know the field.
    public func wireName(forSchemaVersion schemaVersion: Int) -> String? {
        guard schemaVersion >= since else { return nil }
        if let renamedFrom, let renamedInVersion, schemaVersion < renamedInVersion { return renamedFrom }
        return name
    }
}

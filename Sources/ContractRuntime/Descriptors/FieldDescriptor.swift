/// One field of a contract.
public struct FieldDescriptor: Hashable, Sendable {
    /// The wire key and column name.
    public var name: String
    /// The field's type.
    public var kind: FieldKind
    /// Whether the field may be missing or `null`.
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
    /// The most characters (`id`, `string`), bytes (`bytes`) or items (`list<T>`) a value may
    /// have on a write (`max_length`); `nil`: no such limit.
    public var maxLength: Int?
    /// The most bytes a value may take as stored, checked on every write (`FieldCodec/Mode/write`):
    /// the UTF-8 bytes of a string, the canonical JSON text of a `json` or `list<T>`, the raw
    /// bytes of `bytes`. The contract's `max_bytes`, else ``defaultMaximumBytes(for:maxLength:)``;
    /// `nil` for the types it does not apply to (``FieldKind/acceptsMaxBytes``; ids have their
    /// own `FieldCodec/maximumIDBytes`) and for local fields, which never leave the device.
    /// For a `file`, the most bytes the file it names may have (the reference itself is small).
    public var maxBytes: Int?
    /// For a `file`, the content types it accepts (`image/jpeg`, `image/*`); empty: any.
    public var contentTypes: [String]
    /// Whether the field is the primary key.
    public var isPrimaryKey: Bool
    /// Whether the field is the entity's version field.
    public var isVersionField: Bool
    /// A client-only column: never on the wire, never on the server.
    public var isLocal: Bool
    /// For a `ref` field, the kind of its target's primary key, which its column holds (the
    /// compiler resolves it; `nil` elsewhere, and in a descriptor built by hand, which a
    /// `FieldCodec` then resolves from the entities it was made with).
    public var referencedKey: FieldKind?

    /// A descriptor from its parts, as generated code writes it.
    public init(
        name: String, kind: FieldKind, isOptional: Bool = false, defaultValue: JSONValue? = nil, since: Int = 1,
        renamedFrom: String? = nil, renamedInVersion: Int? = nil, deprecation: String? = nil, isEncrypted: Bool = false,
        maxLength: Int? = nil, maxBytes: Int? = nil, isPrimaryKey: Bool = false, isVersionField: Bool = false,
        isLocal: Bool = false, referencedKey: FieldKind? = nil, contentTypes: [String] = []
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
        // Generated code passes only a written `max_bytes`: the default is applied here, by the
        // same rule the contract compiler checks limits with.
        self.maxBytes = isLocal ? maxBytes : maxBytes ?? Self.defaultMaximumBytes(for: kind, maxLength: maxLength)
        self.isPrimaryKey = isPrimaryKey
        self.isVersionField = isVersionField
        self.isLocal = isLocal
        self.referencedKey = referencedKey
        self.contentTypes = contentTypes
    }

    /// The key this field has on the wire for a device running `schemaVersion`, or `nil` when
    /// that version does not know the field.
    public func wireName(forSchemaVersion schemaVersion: Int) -> String? {
        guard schemaVersion >= since else { return nil }
        if let renamedFrom, let renamedInVersion, schemaVersion < renamedInVersion { return renamedFrom }
        return name
    }

    /// The byte limit of a field whose contract does not write `max_bytes`: 256 kB (256,000
    /// bytes, the contract language's decimal units).
    public static let defaultMaximumBytes = 256_000

    /// The file size limit of a `file` field built without `max_bytes` (the contract compiler
    /// asks for one): 100 MB.
    public static let defaultMaximumFileBytes = 100_000_000

    /// The byte limit of a field of `kind` without `max_bytes`: ``defaultMaximumBytes``, or more
    /// when its `max_length` already allows more (a `bytes` field's `max_length` bytes, four UTF-8
    /// bytes per character of a `string`), so that a limit written before `max_bytes` existed
    /// never becomes stricter. `nil` for the types the limit does not apply to.
    public static func defaultMaximumBytes(for kind: FieldKind, maxLength: Int?) -> Int? {
        guard kind.acceptsMaxBytes else { return nil }
        if kind == .file { return defaultMaximumFileBytes }
        let allowedByLength: Int
        switch (kind, maxLength) {
        case (.bytes, let length?): allowedByLength = length
        case (.string, let length?): allowedByLength = length > Int.max / 4 ? Int.max : length * 4
        default: allowedByLength = 0
        }
        return max(defaultMaximumBytes, allowedByLength)
    }
}

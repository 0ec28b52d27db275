public import ContractRuntime

// The sync policies (`SyncDirection`, `ConflictPolicy`, `SyncPriority`), scope access and field
// types are the runtime's own types: the compiler reads contracts into the values generated
// code describes them with, so the two cannot disagree.

/// The project manifest, `contracts/contracts.yaml`: scopes and compatibility defaults.
public struct Manifest: Hashable, Sendable {
    /// The manifest's path, as diagnostics name it.
    public var file: String
    /// The scopes it declares, in manifest order.
    public var scopes: [Scope]
    /// The compatibility modes contracts inherit unless they set their own.
    public var compatibility: CompatibilityDefaults
    /// The subscriptions, in manifest order.
    public var subscriptions: [Subscription]

    /// A manifest from its parts, as the loader reads them.
    public init(file: String, scopes: [Scope], compatibility: CompatibilityDefaults, subscriptions: [Subscription] = []) {
        self.file = file
        self.scopes = scopes
        self.compatibility = compatibility
        self.subscriptions = subscriptions
    }

    /// The scope with the given name, if the manifest declares one.
    public func scope(named name: String) -> Scope? { scopes.first { $0.name == name } }
}

/// A sync scope: the partition of data a device subscribes to, and who may read and write it.
public struct Scope: Hashable, Sendable {
    /// Who may use a scope, from a device's point of view: the runtime's own.
    public typealias Access = ScopeDescriptor.Access

    /// The scope's name, as contracts refer to it.
    public var name: String
    /// The key template, for example `progress:user:{user_id}`.
    public var key: String
    /// Who may read and write the scope's data.
    public var access: Access
    /// The scope's documentation, if written.
    public var doc: String?
    /// Where the scope's name is written.
    public var location: SourceLocation

    /// A scope from its parts, as the loader reads them.
    public init(name: String, key: String, access: Access, doc: String?, location: SourceLocation) {
        self.name = name
        self.key = key
        self.access = access
        self.doc = doc
        self.location = location
    }

    /// The placeholders of the key template, in order (`user_id` for `progress:user:{user_id}`).
    public var placeholders: [String] { ScopePlaceholder.names(in: key) }
}

/// How a new version of a contract must relate to the versions devices still run.
public enum CompatibilityMode: String, Hashable, Sendable, CaseIterable {
    /// The new schema reads data written with every supported older schema.
    case backward
    /// Every supported older schema reads data written with the new one.
    case forward
    /// Both.
    case full
    /// No check.
    case none
}

/// The manifest's `compatibility:` block: the default mode for entities and for events.
public struct CompatibilityDefaults: Hashable, Sendable {
    /// The mode every entity uses unless it sets its own.
    public var entities: CompatibilityMode
    /// The mode every event uses unless it sets its own.
    public var events: CompatibilityMode

    /// Defaults from the mode of each kind.
    public init(entities: CompatibilityMode, events: CompatibilityMode) {
        self.entities = entities
        self.events = events
    }
}

/// The `sync:` block of a contract.
public struct SyncPolicy: Hashable, Sendable {
    /// Which way rows travel: down from the server, up from devices, or both.
    public var direction: SyncDirection
    /// How the server settles two writes of the same row.
    public var conflict: ConflictPolicy
    /// Whether a deletion leaves a tombstone that devices pull.
    public var tombstones: Bool
    /// How long a device keeps synced rows, in seconds; `nil` keeps them until deleted.
    public var retentionSeconds: Int?
    /// How early the contract's rows sync against other contracts'.
    public var priority: SyncPriority
    /// The most rows of the contract a device keeps (`max_rows`); `nil`: no limit of its own.
    /// The app may override it (SyncClient's `StorageLimits`).
    public var maxRows: Int?
    /// The largest row a device keeps, in bytes as stored (`max_row_bytes`); `nil`: no limit.
    public var maxRowBytes: Int?
    /// Where the `sync:` block is written.
    public var location: SourceLocation

    /// A policy from its parts, as the loader reads them.
    public init(
        direction: SyncDirection, conflict: ConflictPolicy, tombstones: Bool, retentionSeconds: Int?,
        priority: SyncPriority, maxRows: Int? = nil, maxRowBytes: Int? = nil, location: SourceLocation
    ) {
        self.direction = direction
        self.conflict = conflict
        self.tombstones = tombstones
        self.retentionSeconds = retentionSeconds
        self.priority = priority
        self.maxRows = maxRows
        self.maxRowBytes = maxRowBytes
        self.location = location
    }
}

/// A field's default, as JSON: the runtime's `JSONValue` (a list default is `.array`).
public typealias DefaultValue = JSONValue

/// A field rename: the field was called `name` before `version`.
public struct Rename: Hashable, Sendable {
    /// The field's earlier name.
    public var name: String
    /// The contract version that renamed it.
    public var version: Int
    /// Where the rename is written.
    public var location: SourceLocation

    /// A rename from its parts, as the loader reads them.
    public init(name: String, version: Int, location: SourceLocation) {
        self.name = name
        self.version = version
        self.location = location
    }
}

/// A documented exception to one compatibility rule, written in the contract on the exact
/// field or contract it concerns: `allow: [{ rule: FIELD_REMOVED, reason: "...", until: 2026-12-31 }]`.
public struct Allowance: Hashable, Sendable {
    /// The rule it excuses.
    public var rule: RuleID
    /// Why the change is accepted, as written.
    public var reason: String
    /// The last day the allowance holds, `YYYY-MM-DD`.
    public var until: String
    /// For a contract-level allowance, the (removed) field it is about, if any.
    public var field: String?
    /// Where the allowance is written.
    public var location: SourceLocation

    /// An allowance from its parts, as the loader reads them.
    public init(rule: RuleID, reason: String, until: String, field: String?, location: SourceLocation) {
        self.rule = rule
        self.reason = reason
        self.until = until
        self.field = field
        self.location = location
    }
}

/// One field of a contract (or a client-only `local` field of an entity).
public struct Field: Hashable, Sendable {
    /// The field's name in the contract and its column.
    public var name: String
    /// The field's type as written, optionality included.
    public var type: TypeReference
    /// The value a device or the server uses when the field is missing, if any.
    public var defaultValue: DefaultValue?
    /// The contract version that added the field (1 when not given).
    public var since: Int
    /// The rename the field went through, if it has one.
    public var renamedFrom: Rename?
    /// Why the field is deprecated; `nil` when it is not.
    public var deprecated: String?
    /// Whether the field is stored encrypted on devices (`encrypted: true`).
    public var isEncrypted: Bool
    /// Kept and computed by the server only: never in a DTO devices decode, a client table,
    /// a pull page or a content route (answer keys, grades).
    public var isServerOnly: Bool = false
    /// The longest string the field accepts, in characters (`max_length`), if limited.
    public var maxLength: Int?
    /// The `max_bytes` written in the contract, if any (``effectiveMaxBytes`` is the limit in
    /// force).
    public var maxBytes: Int?
    /// Where `max_bytes` is written.
    public var maxBytesLocation: SourceLocation?
    /// For a `file`, the content types it accepts (`image/jpeg`, `image/*`, `*/*`), as written;
    /// empty for every other type.
    public var contentTypes: [String] = []
    /// Where `content_types` is written.
    public var contentTypesLocation: SourceLocation?
    /// Whether the field is the contract's primary key.
    public var isPrimaryKey: Bool
    /// Whether the field is the entity's version field (the row's optimistic-concurrency counter).
    public var isVersionField: Bool
    /// Whether the field is a client-only `local` field that never syncs.
    public var isLocal: Bool
    /// The field's documentation, if written.
    public var doc: String?
    /// Compatibility exceptions for this field.
    public var allowances: [Allowance] = []
    /// `false` when the written type could not be read; the field is kept (so one typo does
    /// not also report a missing primary key) but type-based rules skip it.
    public var hasValidType: Bool = true
    /// Where the field's name is written.
    public var location: SourceLocation
    /// Where the field's type is written.
    public var typeLocation: SourceLocation
    /// Where the field's default is written, if it has one.
    public var defaultLocation: SourceLocation?
    /// Where `since` is written, if it is.
    public var sinceLocation: SourceLocation?

    /// A field from its parts, as the loader reads them.
    public init(
        name: String, type: TypeReference, defaultValue: DefaultValue? = nil, since: Int = 1,
        renamedFrom: Rename? = nil, deprecated: String? = nil, isEncrypted: Bool = false, maxLength: Int? = nil,
        isPrimaryKey: Bool = false, isVersionField: Bool = false, isLocal: Bool = false, doc: String? = nil,
        location: SourceLocation, typeLocation: SourceLocation? = nil, defaultLocation: SourceLocation? = nil,
        sinceLocation: SourceLocation? = nil
    ) {
        self.name = name
        self.type = type
        self.defaultValue = defaultValue
        self.since = since
        self.renamedFrom = renamedFrom
        self.deprecated = deprecated
        self.isEncrypted = isEncrypted
        self.maxLength = maxLength
        self.maxBytes = nil
        self.isPrimaryKey = isPrimaryKey
        self.isVersionField = isVersionField
        self.isLocal = isLocal
        self.doc = doc
        self.location = location
        self.typeLocation = typeLocation ?? location
        self.defaultLocation = defaultLocation
        self.sinceLocation = sinceLocation
    }
}

extension Field {
    /// The byte limit in force, as the runtime applies it (`FieldDescriptor.maxBytes`): the
    /// written `max_bytes`, else the default for the field's type and `max_length`; `nil` for
    /// types without one and for local fields.
    public var effectiveMaxBytes: Int? {
        guard !isLocal, type.type.acceptsMaxBytes else { return nil }
        return maxBytes ?? FieldDescriptor.defaultMaximumBytes(for: type.type, maxLength: maxLength)
    }

    /// The most bytes the field's value takes in its row: ``effectiveMaxBytes``, but `nil` for a
    /// `file`, whose limit is the size of the file it names (the reference in the row is small).
    public var storedMaxBytes: Int? {
        type.type == .file ? nil : effectiveMaxBytes
    }
}

/// A named relation from one entity to another.
public struct Relation: Hashable, Sendable {
    /// `has_many` or `belongs_to`: the runtime's own.
    public typealias Kind = RelationDescriptor.Kind

    /// The relation's name, as generated code exposes it.
    public var name: String
    /// Whether the entity has many of the target or belongs to one.
    public var kind: Kind
    /// The entity the relation points to.
    public var target: String
    /// The field holding the key that joins the two.
    public var foreignKey: String
    /// Where the relation's name is written.
    public var location: SourceLocation
    /// Where the target is written.
    public var targetLocation: SourceLocation
    /// Where the foreign key is written.
    public var foreignKeyLocation: SourceLocation

    /// A relation from its parts, as the loader reads them.
    public init(
        name: String, kind: Kind, target: String, foreignKey: String, location: SourceLocation,
        targetLocation: SourceLocation, foreignKeyLocation: SourceLocation
    ) {
        self.name = name
        self.kind = kind
        self.target = target
        self.foreignKey = foreignKey
        self.location = location
        self.targetLocation = targetLocation
        self.foreignKeyLocation = foreignKeyLocation
    }
}

/// An index on an entity's table (client and server).
public struct Index: Hashable, Sendable {
    /// The indexed fields, in order.
    public var fields: [String]
    /// Whether two rows may not share the indexed values.
    public var isUnique: Bool
    /// Where the index is written.
    public var location: SourceLocation

    /// An index from its parts, as the loader reads them.
    public init(fields: [String], isUnique: Bool, location: SourceLocation) {
        self.fields = fields
        self.isUnique = isUnique
        self.location = location
    }
}

/// An entity (a row that syncs) or an event (an immutable fact a device records).
public struct Contract: Hashable, Sendable {
    /// Whether a contract is an entity or an event.
    public enum Kind: String, Hashable, Sendable {
        case entity
        case event
    }

    /// Whether the contract is an entity or an event.
    public var kind: Kind
    /// The contract's name as written, unique in the set.
    public var name: String
    /// The Swift type name; the contract name unless `swift_name` overrides it.
    public var swiftName: String
    /// The one-line summary every contract must have.
    public var summary: String
    /// The contract's longer documentation, if written.
    public var doc: String?
    /// The current version of its schema.
    public var version: Int
    /// The oldest version devices may still run; older ones must update.
    public var oldestSupported: Int
    /// The table its rows or events are stored in.
    public var table: String
    /// The name of the scope it syncs in.
    public var scope: String
    /// How it syncs: direction, conflicts, tombstones, retention, priority and limits.
    public var sync: SyncPolicy
    /// Its synced fields, in the order written.
    public var fields: [Field]
    /// The entity's client-only `local` fields, which never sync.
    public var localFields: [Field]
    /// The fields devices see: every synced field but the server-only ones.
    public var deviceFields: [Field] { fields.filter { !$0.isServerOnly } }
    /// The fields only the server holds (``Field/isServerOnly``).
    public var serverOnlyFields: [Field] { fields.filter(\.isServerOnly) }
    /// The entity's relations to other entities.
    public var relations: [Relation]
    /// The indexes on its table.
    public var indexes: [Index]
    /// For an event, the entity the server folds it into (`applies_to`), if any.
    public var appliesTo: String?
    /// The contract's `max_bytes` (the largest row a writer may store) as written, if any
    /// (``effectiveMaxBytes`` is the limit in force).
    public var maxBytes: Int?
    /// Where the contract's `max_bytes` is written.
    public var maxBytesLocation: SourceLocation?
    /// Whether every write of it must carry its device's signature (`signed: true`; events and
    /// append-only entities): the server refuses one without a valid signature.
    public var isSigned = false
    /// Where `signed` is written.
    public var signedLocation: SourceLocation?
    /// A per-contract override of the manifest's compatibility mode.
    public var compatibility: CompatibilityMode?
    /// Compatibility exceptions for the contract as a whole (or for removed fields).
    public var allowances: [Allowance] = []
    /// The file it was read from, as diagnostics name it.
    public var file: String
    /// The file's path relative to the contracts folder's parent (`contracts/entities/unit.yaml`),
    /// the same on every machine; generated files name it.
    public var sourcePath: String
    /// Where the contract's name is written.
    public var location: SourceLocation
    /// Where `version` is written.
    public var versionLocation: SourceLocation
    /// Where `oldest_supported` is written, if it is.
    public var oldestSupportedLocation: SourceLocation?
    /// Where `scope` is written.
    public var scopeLocation: SourceLocation
    /// Where `applies_to` is written, if it is.
    public var appliesToLocation: SourceLocation?
    /// Where `table` is written.
    public var tableLocation: SourceLocation

    /// A contract from its parts, as the loader reads them.
    public init(
        kind: Kind, name: String, swiftName: String, summary: String, doc: String?, version: Int,
        oldestSupported: Int, table: String, scope: String, sync: SyncPolicy, fields: [Field],
        localFields: [Field], relations: [Relation], indexes: [Index], appliesTo: String?,
        compatibility: CompatibilityMode?, file: String, location: SourceLocation, versionLocation: SourceLocation,
        oldestSupportedLocation: SourceLocation?, scopeLocation: SourceLocation, appliesToLocation: SourceLocation?,
        tableLocation: SourceLocation
    ) {
        self.kind = kind
        self.name = name
        self.swiftName = swiftName
        self.summary = summary
        self.doc = doc
        self.version = version
        self.oldestSupported = oldestSupported
        self.table = table
        self.scope = scope
        self.sync = sync
        self.fields = fields
        self.localFields = localFields
        self.relations = relations
        self.indexes = indexes
        self.appliesTo = appliesTo
        self.maxBytes = nil
        self.compatibility = compatibility
        self.file = file
        self.sourcePath = file
        self.location = location
        self.versionLocation = versionLocation
        self.oldestSupportedLocation = oldestSupportedLocation
        self.scopeLocation = scopeLocation
        self.appliesToLocation = appliesToLocation
        self.tableLocation = tableLocation
    }

    /// The primary key field, if one is marked.
    public var primaryKey: Field? { fields.first { $0.isPrimaryKey } }

    /// The row limit in force, as the runtime applies it (`EntityDescriptor.maxBytes`): the
    /// written `max_bytes`, else the default from the fields' limits (server-only ones too:
    /// the server stores them in the same row; not a file's, which limits the file, not the row).
    public var effectiveMaxBytes: Int {
        maxBytes ?? RowSize.defaultMaximumBytes(largestFieldBytes: fields.compactMap(\.storedMaxBytes).max() ?? 0)
    }
    /// The version field, if one is marked.
    public var versionField: Field? { fields.first { $0.isVersionField } }
    /// The synced field with the given name, if there is one.
    public func field(named name: String) -> Field? { fields.first { $0.name == name } }

    /// The compatibility mode in force: the contract's own, else the manifest's default for its kind.
    public func effectiveCompatibility(_ defaults: CompatibilityDefaults) -> CompatibilityMode {
        compatibility ?? (kind == .entity ? defaults.entities : defaults.events)
    }
}

/// Everything the compiler read: the manifest and every contract, sorted by name.
public struct ContractSet: Hashable, Sendable {
    /// The project manifest.
    public var manifest: Manifest
    /// Every contract, sorted by name.
    public var contracts: [Contract]

    /// A set from the manifest and its contracts, which it sorts by name.
    public init(manifest: Manifest, contracts: [Contract]) {
        self.manifest = manifest
        self.contracts = contracts.sorted { $0.name < $1.name }
    }

    /// The set with the `since` of every field that leaves it out taken from the released
    /// history: the first version of the contract that has the field (under its name, or the
    /// name it was renamed from), or the contract's current version for a field no released
    /// version has. A contract without released versions keeps `since: 1` for every field.
    /// A `since` the author wrote is kept as written, and checked against the history.
    public func resolvingSince(history: [String: [Contract]]) -> ContractSet {
        var resolved = self
        resolved.contracts = contracts.map { contract in
            guard let released = history[contract.name], !released.isEmpty else { return contract }
            var contract = contract
            for index in contract.fields.indices where contract.fields[index].sinceLocation == nil {
                let field = contract.fields[index]
                let names = [field.name] + (field.renamedFrom.map { [$0.name] } ?? [])
                let holder = released.last { version in names.contains { version.field(named: $0) != nil } }
                if let holder, let known = names.lazy.compactMap({ holder.field(named: $0) }).first {
                    contract.fields[index].since = known.since
                } else {
                    contract.fields[index].since = contract.version
                }
            }
            return contract
        }
        return resolved
    }

    /// The entity contracts, in name order.
    public var entities: [Contract] { contracts.filter { $0.kind == .entity } }
    /// The event contracts, in name order.
    public var events: [Contract] { contracts.filter { $0.kind == .event } }
    /// The contract with the given name, if the set has one.
    public func contract(named name: String) -> Contract? { contracts.first { $0.name == name } }
}

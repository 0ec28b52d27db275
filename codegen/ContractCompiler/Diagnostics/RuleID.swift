/// The stable identifier of a diagnostic rule. Identifiers never change once published:
/// CI scripts, allowances and `contractc explain` refer to them.
public struct RuleID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The identifier as written, such as `UNKNOWN_KEY`.
    public var rawValue: String

    /// An identifier from its raw value; any string is accepted.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// An identifier from its raw value, unlabelled.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The raw value, as diagnostics print it.
    public var description: String { rawValue }

    /// Orders identifiers alphabetically by raw value.
    public static func < (lhs: RuleID, rhs: RuleID) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension RuleID {
    // Input files
    /// `YAML_SYNTAX`: the file is not valid YAML.
    public static let yamlSyntax = RuleID("YAML_SYNTAX")
    /// `YAML_UNSUPPORTED`: a YAML feature contracts do not use.
    public static let yamlUnsupported = RuleID("YAML_UNSUPPORTED")
    /// `FILE_UNREADABLE`: the file cannot be read as text.
    public static let fileUnreadable = RuleID("FILE_UNREADABLE")
    /// `FILE_TOO_LARGE`: the file is larger than 1 MiB.
    public static let fileTooLarge = RuleID("FILE_TOO_LARGE")
    /// `EMPTY_FILE`: the file is empty.
    public static let emptyFile = RuleID("EMPTY_FILE")
    /// `NESTING_TOO_DEEP`: nesting deeper than 32 levels.
    public static let nestingTooDeep = RuleID("NESTING_TOO_DEEP")
    /// `MISSING_MANIFEST`: no contracts/contracts.yaml.
    public static let missingManifest = RuleID("MISSING_MANIFEST")
    /// `NOT_A_CONTRACT`: the file is not an entity or an event.
    public static let notAContract = RuleID("NOT_A_CONTRACT")

    // Structure
    /// `UNEXPECTED_NODE`: a list, mapping or value where another kind is expected.
    public static let unexpectedNode = RuleID("UNEXPECTED_NODE")
    /// `UNKNOWN_KEY`: a key the language does not know here.
    public static let unknownKey = RuleID("UNKNOWN_KEY")
    /// `MISSING_KEY`: a required key is missing.
    public static let missingKey = RuleID("MISSING_KEY")
    /// `DUPLICATE_KEY`: a key written twice.
    public static let duplicateKey = RuleID("DUPLICATE_KEY")
    /// `INVALID_VALUE`: a value outside what the key accepts.
    public static let invalidValue = RuleID("INVALID_VALUE")

    // Names
    /// `INVALID_IDENTIFIER`: a name that is not a valid identifier.
    public static let invalidIdentifier = RuleID("INVALID_IDENTIFIER")
    /// `RESERVED_WORD`: a name that is an SQL or Swift keyword.
    public static let reservedWord = RuleID("RESERVED_WORD")
    /// `RESERVED_NAME`: a name kept for the sync engine.
    public static let reservedName = RuleID("RESERVED_NAME")
    /// `SHADOWS_SWIFT_TYPE`: a contract whose Swift type would hide a standard one.
    public static let shadowsSwiftType = RuleID("SHADOWS_SWIFT_TYPE")
    /// `DUPLICATE_CONTRACT`: two contracts with the same name or Swift type.
    public static let duplicateContract = RuleID("DUPLICATE_CONTRACT")
    /// `DUPLICATE_TABLE`: two contracts share a table.
    public static let duplicateTable = RuleID("DUPLICATE_TABLE")
    /// `DUPLICATE_FIELD`: a field declared twice.
    public static let duplicateField = RuleID("DUPLICATE_FIELD")
    /// `DUPLICATE_INDEX`: the same index twice.
    public static let duplicateIndex = RuleID("DUPLICATE_INDEX")

    // Types and values
    /// `UNKNOWN_TYPE`: a type the language does not know.
    public static let unknownType = RuleID("UNKNOWN_TYPE")
    /// `ENUM_WITHOUT_VALUES`: an enum without values.
    public static let enumWithoutValues = RuleID("ENUM_WITHOUT_VALUES")
    /// `DUPLICATE_ENUM_VALUE`: an enum value listed twice.
    public static let duplicateEnumValue = RuleID("DUPLICATE_ENUM_VALUE")
    /// `INVALID_ENUM_FALLBACK`: a fallback that is not one of the values.
    public static let invalidEnumFallback = RuleID("INVALID_ENUM_FALLBACK")
    /// `DEFAULT_TYPE_MISMATCH`: a default that does not fit the type.
    public static let defaultTypeMismatch = RuleID("DEFAULT_TYPE_MISMATCH")
    /// `UNKNOWN_REFERENCE`: a reference to a contract that does not exist.
    public static let unknownReference = RuleID("UNKNOWN_REFERENCE")
    /// `MAX_LENGTH_NOT_APPLICABLE`: max_length on a type without a length.
    public static let maxLengthNotApplicable = RuleID("MAX_LENGTH_NOT_APPLICABLE")
    /// `MAX_BYTES_NOT_APPLICABLE`: max_bytes on a type without a byte limit.
    public static let maxBytesNotApplicable = RuleID("MAX_BYTES_NOT_APPLICABLE")
    /// `MAX_BYTES_ABOVE_ROW_LIMIT`: a field may take more bytes than its row.
    public static let maxBytesAboveRowLimit = RuleID("MAX_BYTES_ABOVE_ROW_LIMIT")
    /// `INVALID_CONTENT_TYPE`: a file field's content type that is not a media type pattern.
    public static let invalidContentType = RuleID("INVALID_CONTENT_TYPE")
    /// `DUPLICATE_CONTENT_TYPE`: a content type listed twice.
    public static let duplicateContentType = RuleID("DUPLICATE_CONTENT_TYPE")

    // Keys and versions
    /// `MISSING_PRIMARY_KEY`: an entity without a primary key.
    public static let missingPrimaryKey = RuleID("MISSING_PRIMARY_KEY")
    /// `MULTIPLE_PRIMARY_KEYS`: more than one primary key.
    public static let multiplePrimaryKeys = RuleID("MULTIPLE_PRIMARY_KEYS")
    /// `INVALID_PRIMARY_KEY`: a primary key of the wrong kind.
    public static let invalidPrimaryKey = RuleID("INVALID_PRIMARY_KEY")
    /// `INVALID_VERSION_FIELD`: a version field that is not a timestamp or int.
    public static let invalidVersionField = RuleID("INVALID_VERSION_FIELD")
    /// `MULTIPLE_VERSION_FIELDS`: more than one version field.
    public static let multipleVersionFields = RuleID("MULTIPLE_VERSION_FIELDS")
    /// `OLDEST_SUPPORTED_ABOVE_VERSION`: oldest_supported above version.
    public static let oldestSupportedAboveVersion = RuleID("OLDEST_SUPPORTED_ABOVE_VERSION")
    /// `SINCE_ABOVE_VERSION`: a field added after the current version.
    public static let sinceAboveVersion = RuleID("SINCE_ABOVE_VERSION")
    /// `INVALID_RENAME`: a rename that cannot be right.
    public static let invalidRename = RuleID("INVALID_RENAME")
    /// `ENCRYPTED_NOT_ALLOWED`: encryption on a field that is looked up.
    public static let encryptedNotAllowed = RuleID("ENCRYPTED_NOT_ALLOWED")
    /// `SERVER_ONLY_NOT_ALLOWED`: a server-only field devices would need.
    public static let serverOnlyNotAllowed = RuleID("SERVER_ONLY_NOT_ALLOWED")
    /// `LOCAL_FIELD_NEEDS_DEFAULT`: a required local field without a default.
    public static let localFieldNeedsDefault = RuleID("LOCAL_FIELD_NEEDS_DEFAULT")
    /// `UNKNOWN_INDEX_FIELD`: an index on a field that does not exist or cannot be indexed.
    public static let unknownIndexField = RuleID("UNKNOWN_INDEX_FIELD")
    /// `UNKNOWN_FOREIGN_KEY`: a relation whose foreign key is not a field.
    public static let unknownForeignKey = RuleID("UNKNOWN_FOREIGN_KEY")
    /// `FOREIGN_KEY_TYPE_MISMATCH`: a foreign key of the wrong type.
    public static let foreignKeyTypeMismatch = RuleID("FOREIGN_KEY_TYPE_MISMATCH")
    /// `GENERATED_NAME_CLASH`: two names that generate the same Swift name.
    public static let generatedNameClash = RuleID("GENERATED_NAME_CLASH")

    // Sync
    /// `UNKNOWN_SCOPE`: a scope the manifest does not declare.
    public static let unknownScope = RuleID("UNKNOWN_SCOPE")
    /// `SCOPE_KEY_FIELD_MISSING`: a scope key placeholder the contract does not carry.
    public static let scopeKeyFieldMissing = RuleID("SCOPE_KEY_FIELD_MISSING")
    /// `POLICY_DIRECTION_MISMATCH`: a conflict policy that makes no sense for the direction.
    public static let policyDirectionMismatch = RuleID("POLICY_DIRECTION_MISMATCH")
    /// `EVENT_POLICY`: an event that is not append-only and device-recorded.
    public static let eventPolicy = RuleID("EVENT_POLICY")
    /// `ENVELOPE_FIELD_SHADOWED`: an event field named like an envelope field.
    public static let envelopeFieldShadowed = RuleID("ENVELOPE_FIELD_SHADOWED")
    /// `SIGNED_NOT_ALLOWED`: `signed: true` on a contract whose rows change after they are written.
    public static let signedNotAllowed = RuleID("SIGNED_NOT_ALLOWED")
    /// `DEPRECATED_WITHOUT_REASON`: deprecated without a reason.
    public static let deprecatedWithoutReason = RuleID("DEPRECATED_WITHOUT_REASON")
    /// `MISSING_SUMMARY`: a contract without a summary (warning).
    public static let missingSummary = RuleID("MISSING_SUMMARY")

    // Subscriptions
    /// `SUBSCRIPTION_ENTITY`: a subscription's entity cannot be subscribed to.
    public static let subscriptionEntity = RuleID("SUBSCRIPTION_ENTITY")
    /// `SUBSCRIPTION_FILTER`: a subscription's filter the server cannot answer from an index.
    public static let subscriptionFilter = RuleID("SUBSCRIPTION_FILTER")
    /// `SUBSCRIPTION_PARAMETER`: a subscription's parameters and conditions do not agree.
    public static let subscriptionParameter = RuleID("SUBSCRIPTION_PARAMETER")
    /// `SUBSCRIPTION_INCLUDE`: a subscription includes what it cannot take along.
    public static let subscriptionInclude = RuleID("SUBSCRIPTION_INCLUDE")

    // Allowances
    /// `INVALID_ALLOWANCE`: an allowance that is incomplete or names an unknown rule.
    public static let invalidAllowance = RuleID("INVALID_ALLOWANCE")
    /// `ALLOWANCE_EXPIRED`: an allowance past its date.
    public static let allowanceExpired = RuleID("ALLOWANCE_EXPIRED")

    // Compatibility (contractc check)
    /// `CONTRACT_DELETED`: a released contract was deleted.
    public static let contractDeleted = RuleID("CONTRACT_DELETED")
    /// `VERSION_NOT_BUMPED`: the contract changed but kept a released version.
    public static let versionNotBumped = RuleID("VERSION_NOT_BUMPED")
    /// `VERSION_DECREASED`: the version went down.
    public static let versionDecreased = RuleID("VERSION_DECREASED")
    /// `RELEASED_VERSION_MODIFIED`: a released version in contracts.lock was edited.
    public static let releasedVersionModified = RuleID("RELEASED_VERSION_MODIFIED")
    /// `RELEASED_MIGRATION_MODIFIED`: a released migration would change.
    public static let releasedMigrationModified = RuleID("RELEASED_MIGRATION_MODIFIED")
    /// `LOCK_UNREADABLE`: contracts.lock cannot be read.
    public static let lockUnreadable = RuleID("LOCK_UNREADABLE")
    /// `FIELD_REMOVED`: a field was removed.
    public static let fieldRemoved = RuleID("FIELD_REMOVED")
    /// `FIELD_TYPE_CHANGED`: a field's type changed.
    public static let fieldTypeChanged = RuleID("FIELD_TYPE_CHANGED")
    /// `OPTIONAL_MADE_REQUIRED`: an optional field became required.
    public static let optionalMadeRequired = RuleID("OPTIONAL_MADE_REQUIRED")
    /// `REQUIRED_FIELD_ADDED`: a required field was added without a default.
    public static let requiredFieldAdded = RuleID("REQUIRED_FIELD_ADDED")
    /// `DEFAULT_CHANGED`: a field's default changed.
    public static let defaultChanged = RuleID("DEFAULT_CHANGED")
    /// `MAX_LENGTH_REDUCED`: max_length was lowered.
    public static let maxLengthReduced = RuleID("MAX_LENGTH_REDUCED")
    /// `MAX_BYTES_REDUCED`: max_bytes was lowered.
    public static let maxBytesReduced = RuleID("MAX_BYTES_REDUCED")
    /// `FILE_MAX_BYTES_REDUCED`: a file field's max_bytes was lowered.
    public static let fileMaxBytesReduced = RuleID("FILE_MAX_BYTES_REDUCED")
    /// `FILE_CONTENT_TYPES_NARROWED`: a file field no longer accepts a content type it accepted.
    public static let fileContentTypesNarrowed = RuleID("FILE_CONTENT_TYPES_NARROWED")
    /// `ENUM_VALUE_REMOVED`: an enum value was removed.
    public static let enumValueRemoved = RuleID("ENUM_VALUE_REMOVED")
    /// `ENUM_VALUE_ADDED`: an enum value was added.
    public static let enumValueAdded = RuleID("ENUM_VALUE_ADDED")
    /// `PRIMARY_KEY_CHANGED`: the primary key changed.
    public static let primaryKeyChanged = RuleID("PRIMARY_KEY_CHANGED")
    /// `TABLE_RENAMED`: the table was renamed.
    public static let tableRenamed = RuleID("TABLE_RENAMED")
    /// `SCOPE_CHANGED`: the scope changed.
    public static let scopeChanged = RuleID("SCOPE_CHANGED")
    /// `DIRECTION_CHANGED`: the sync direction changed.
    public static let directionChanged = RuleID("DIRECTION_CHANGED")
    /// `CONFLICT_POLICY_CHANGED`: the conflict policy changed.
    public static let conflictPolicyChanged = RuleID("CONFLICT_POLICY_CHANGED")
    /// `OLDEST_SUPPORTED_DECREASED`: oldest_supported went down.
    public static let oldestSupportedDecreased = RuleID("OLDEST_SUPPORTED_DECREASED")
    /// `SIGNED_TURNED_ON`: `signed: true` turned on while devices that do not sign are supported.
    public static let signedTurnedOn = RuleID("SIGNED_TURNED_ON")
    /// `RENAMED_FROM_UNKNOWN`: renamed_from names a field that never existed.
    public static let renamedFromUnknown = RuleID("RENAMED_FROM_UNKNOWN")
    /// `SINCE_REWRITTEN`: a field's `since` differs from its history.
    public static let sinceRewritten = RuleID("SINCE_REWRITTEN")
    /// `SUBSCRIPTION_REMOVED`: a subscription devices still use was removed.
    public static let subscriptionRemoved = RuleID("SUBSCRIPTION_REMOVED")
    /// `SUBSCRIPTION_CHANGED`: a subscription devices still use changed its parameters, filter or includes.
    public static let subscriptionChanged = RuleID("SUBSCRIPTION_CHANGED")

    // Rollout gate (contractc check --fleet)
    /// `FLEET_CUTOFF_EXCEEDED`: raising oldest_supported would cut off too many active devices.
    public static let fleetCutoffExceeded = RuleID("FLEET_CUTOFF_EXCEEDED")
}

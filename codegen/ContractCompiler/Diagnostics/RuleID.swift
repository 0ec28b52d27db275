/// The stable identifier of a diagnostic rule. Identifiers never change once published:
/// CI scripts, allowances and `contractc explain` refer to them.
public struct RuleID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    public static func < (lhs: RuleID, rhs: RuleID) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension RuleID {
    // Input files
    public static let yamlSyntax = RuleID("YAML_SYNTAX")
    public static let yamlUnsupported = RuleID("YAML_UNSUPPORTED")
    public static let fileUnreadable = RuleID("FILE_UNREADABLE")
    public static let fileTooLarge = RuleID("FILE_TOO_LARGE")
    public static let emptyFile = RuleID("EMPTY_FILE")
    public static let nestingTooDeep = RuleID("NESTING_TOO_DEEP")
    public static let missingManifest = RuleID("MISSING_MANIFEST")
    public static let notAContract = RuleID("NOT_A_CONTRACT")

    // Structure
    public static let unexpectedNode = RuleID("UNEXPECTED_NODE")
    public static let unknownKey = RuleID("UNKNOWN_KEY")
    public static let missingKey = RuleID("MISSING_KEY")
    public static let duplicateKey = RuleID("DUPLICATE_KEY")
    public static let invalidValue = RuleID("INVALID_VALUE")

    // Names
    public static let invalidIdentifier = RuleID("INVALID_IDENTIFIER")
    public static let reservedWord = RuleID("RESERVED_WORD")
    public static let reservedName = RuleID("RESERVED_NAME")
    public static let shadowsSwiftType = RuleID("SHADOWS_SWIFT_TYPE")
    public static let duplicateContract = RuleID("DUPLICATE_CONTRACT")
    public static let duplicateTable = RuleID("DUPLICATE_TABLE")
    public static let duplicateField = RuleID("DUPLICATE_FIELD")
    public static let duplicateIndex = RuleID("DUPLICATE_INDEX")

    // Types and values
    public static let unknownType = RuleID("UNKNOWN_TYPE")
    public static let enumWithoutValues = RuleID("ENUM_WITHOUT_VALUES")
    public static let duplicateEnumValue = RuleID("DUPLICATE_ENUM_VALUE")
    public static let invalidEnumFallback = RuleID("INVALID_ENUM_FALLBACK")
    public static let defaultTypeMismatch = RuleID("DEFAULT_TYPE_MISMATCH")
    public static let unknownReference = RuleID("UNKNOWN_REFERENCE")
    public static let maxLengthNotApplicable = RuleID("MAX_LENGTH_NOT_APPLICABLE")
    public static let maxBytesNotApplicable = RuleID("MAX_BYTES_NOT_APPLICABLE")
    public static let maxBytesAboveRowLimit = RuleID("MAX_BYTES_ABOVE_ROW_LIMIT")
    public static let invalidContentType = RuleID("INVALID_CONTENT_TYPE")
    public static let duplicateContentType = RuleID("DUPLICATE_CONTENT_TYPE")

    // Keys and versions
    public static let missingPrimaryKey = RuleID("MISSING_PRIMARY_KEY")
    public static let multiplePrimaryKeys = RuleID("MULTIPLE_PRIMARY_KEYS")
    public static let invalidPrimaryKey = RuleID("INVALID_PRIMARY_KEY")
    public static let invalidVersionField = RuleID("INVALID_VERSION_FIELD")
    public static let multipleVersionFields = RuleID("MULTIPLE_VERSION_FIELDS")
    public static let oldestSupportedAboveVersion = RuleID("OLDEST_SUPPORTED_ABOVE_VERSION")
    public static let sinceAboveVersion = RuleID("SINCE_ABOVE_VERSION")
    public static let invalidRename = RuleID("INVALID_RENAME")
    public static let encryptedNotAllowed = RuleID("ENCRYPTED_NOT_ALLOWED")
    public static let serverOnlyNotAllowed = RuleID("SERVER_ONLY_NOT_ALLOWED")
    public static let localFieldNeedsDefault = RuleID("LOCAL_FIELD_NEEDS_DEFAULT")
    public static let unknownIndexField = RuleID("UNKNOWN_INDEX_FIELD")
    public static let unknownForeignKey = RuleID("UNKNOWN_FOREIGN_KEY")
    public static let foreignKeyTypeMismatch = RuleID("FOREIGN_KEY_TYPE_MISMATCH")
    public static let generatedNameClash = RuleID("GENERATED_NAME_CLASH")

    // Sync
    public static let unknownScope = RuleID("UNKNOWN_SCOPE")
    public static let scopeKeyFieldMissing = RuleID("SCOPE_KEY_FIELD_MISSING")
    public static let policyDirectionMismatch = RuleID("POLICY_DIRECTION_MISMATCH")
    public static let eventPolicy = RuleID("EVENT_POLICY")
    public static let envelopeFieldShadowed = RuleID("ENVELOPE_FIELD_SHADOWED")
    public static let signedNotAllowed = RuleID("SIGNED_NOT_ALLOWED")
    public static let deprecatedWithoutReason = RuleID("DEPRECATED_WITHOUT_REASON")
    public static let missingSummary = RuleID("MISSING_SUMMARY")

    // Subscriptions
    public static let subscriptionEntity = RuleID("SUBSCRIPTION_ENTITY")
    public static let subscriptionFilter = RuleID("SUBSCRIPTION_FILTER")
    public static let subscriptionParameter = RuleID("SUBSCRIPTION_PARAMETER")
    public static let subscriptionInclude = RuleID("SUBSCRIPTION_INCLUDE")

    // Allowances
    public static let invalidAllowance = RuleID("INVALID_ALLOWANCE")
    public static let allowanceExpired = RuleID("ALLOWANCE_EXPIRED")

    // Compatibility (contractc check)
    public static let contractDeleted = RuleID("CONTRACT_DELETED")
    public static let versionNotBumped = RuleID("VERSION_NOT_BUMPED")
    public static let versionDecreased = RuleID("VERSION_DECREASED")
    public static let releasedVersionModified = RuleID("RELEASED_VERSION_MODIFIED")
    public static let releasedMigrationModified = RuleID("RELEASED_MIGRATION_MODIFIED")
    public static let lockUnreadable = RuleID("LOCK_UNREADABLE")
    public static let fieldRemoved = RuleID("FIELD_REMOVED")
    public static let fieldTypeChanged = RuleID("FIELD_TYPE_CHANGED")
    public static let optionalMadeRequired = RuleID("OPTIONAL_MADE_REQUIRED")
    public static let requiredFieldAdded = RuleID("REQUIRED_FIELD_ADDED")
    public static let defaultChanged = RuleID("DEFAULT_CHANGED")
    public static let maxLengthReduced = RuleID("MAX_LENGTH_REDUCED")
    public static let maxBytesReduced = RuleID("MAX_BYTES_REDUCED")
    public static let fileMaxBytesReduced = RuleID("FILE_MAX_BYTES_REDUCED")
    public static let fileContentTypesNarrowed = RuleID("FILE_CONTENT_TYPES_NARROWED")
    public static let enumValueRemoved = RuleID("ENUM_VALUE_REMOVED")
    public static let enumValueAdded = RuleID("ENUM_VALUE_ADDED")
    public static let primaryKeyChanged = RuleID("PRIMARY_KEY_CHANGED")
    public static let tableRenamed = RuleID("TABLE_RENAMED")
    public static let scopeChanged = RuleID("SCOPE_CHANGED")
    public static let directionChanged = RuleID("DIRECTION_CHANGED")
    public static let conflictPolicyChanged = RuleID("CONFLICT_POLICY_CHANGED")
    public static let oldestSupportedDecreased = RuleID("OLDEST_SUPPORTED_DECREASED")
    public static let signedTurnedOn = RuleID("SIGNED_TURNED_ON")
    public static let renamedFromUnknown = RuleID("RENAMED_FROM_UNKNOWN")
    public static let sinceRewritten = RuleID("SINCE_REWRITTEN")
    public static let subscriptionRemoved = RuleID("SUBSCRIPTION_REMOVED")
    public static let subscriptionChanged = RuleID("SUBSCRIPTION_CHANGED")

    // Rollout gate (contractc check --fleet)
    public static let fleetCutoffExceeded = RuleID("FLEET_CUTOFF_EXCEEDED")
}

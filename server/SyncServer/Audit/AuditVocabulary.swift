public import SyncProtocol

/// A word of the audit log's vocabulary (``AuditOperation``, ``AuditOutcome``): typed in code,
/// stored, sealed and exported as its text.
public protocol AuditVocabulary: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible where RawValue == String {
    init(rawValue: String)
}

extension AuditVocabulary {
    /// An app's own word (an operation or outcome the engine does not record itself).
    public init(_ rawValue: String) {
        self.init(rawValue: rawValue)
    }

    /// The word as stored.
    public var description: String { rawValue }
}

/// What an audit entry records was done, or what a push's entry lists was done to one row.
///
/// A struct with the engine's operations as static members rather than a closed enum: an app
/// built on the engine records operations of its own through the content service or its own
/// entries (the learning app's asset `upload`, the inspection example's `review`), which an enum
/// would make a change to the engine. The raw value is what the audit log stores and seals, so
/// no member's text may ever change (existing logs would no longer verify).
public struct AuditOperation: AuditVocabulary {
    /// The operation as the audit log stores and seals it.
    public let rawValue: String

    /// An operation from its stored text.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// A pushed mutation, by its operation.
    public init(_ mutation: MutationOperation) {
        self.init(rawValue: mutation.rawValue)
    }

    /// A push: one entry per push, its detail listing the changes it did.
    public static let push = AuditOperation("push")
    /// A row a reducer wrote for a pushed mutation (listed in the push's entry after it).
    public static let fold = AuditOperation("fold")
    /// The pushed mutations (listed in the push's entry), as `MutationOperation` names them.
    public static let create = AuditOperation(.create)
    /// A pushed update.
    public static let update = AuditOperation(.update)
    /// A pushed patch.
    public static let patch = AuditOperation(.patch)
    /// A pushed event.
    public static let event = AuditOperation(.event)
    /// A pushed deletion, or an admin's deletion of content.
    public static let delete = AuditOperation(.delete)
    /// An admin's publish of a content row.
    public static let publish = AuditOperation("publish")
    /// A content row loaded by `sync-server seed` (``ContentService/publish(rows:identity:operation:)``).
    public static let seed = AuditOperation("seed")
    /// A user's erasure.
    public static let erase = AuditOperation("erase")
}

/// How what an entry records went. A struct like ``AuditOperation``, not a closed enum: a push's
/// entry records the outcomes of all its changes together (`applied,rejected`), and an app
/// writing entries of its own may name its own. Stored and sealed as its raw value.
public struct AuditOutcome: AuditVocabulary {
    /// The outcome as the audit log stores and seals it.
    public let rawValue: String

    /// An outcome from its stored text.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// A pushed mutation's, by the status it was answered with.
    public init(_ status: MutationStatus) {
        self.init(rawValue: status.rawValue)
    }

    /// A push's entry: the outcomes of its changes, each once, sorted, comma separated.
    public init(combining outcomes: some Sequence<AuditOutcome>) {
        self.init(rawValue: Set(outcomes.map(\.rawValue)).sorted().joined(separator: ","))
    }

    /// The answers to a pushed mutation, as `MutationStatus` names them; also a reducer's row.
    public static let applied = AuditOutcome(.applied)
    /// A mutation the server had already done (the same id again).
    public static let duplicate = AuditOutcome(.duplicate)
    /// A write that conflicted with the stored row.
    public static let conflicted = AuditOutcome(.conflicted)
    /// A mutation the server refused.
    public static let rejected = AuditOutcome(.rejected)
    /// A pushed mutation applied in part (`field_merge` kept some of the server's fields).
    public static let merged = AuditOutcome("merged")
    /// A content row written (published, seeded or updated by an app).
    public static let published = AuditOutcome("published")
    /// A content row deleted.
    public static let deleted = AuditOutcome("deleted")
    /// A user's data erased.
    public static let erased = AuditOutcome("erased")
}

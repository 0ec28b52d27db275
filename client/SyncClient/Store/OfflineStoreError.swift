public import Foundation

/// Every failure of ``OfflineStore`` a caller can act on, as one type to `catch` and `switch` on.
///
/// Messages never contain field values (they may be personal data): only contract, field and
/// row names.
public enum OfflineStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    // MARK: Opening

    /// The database was written by a newer build of the app: it holds migrations this build does
    /// not know. The file was not modified; update the app (or sign out to start afresh).
    case createdByNewerBuild(unknownMigrations: [String])
    /// The file exists but is not a SQLite database (or is damaged beyond reading).
    case notADatabase(path: String)
    /// The file or its folder could not be opened or created.
    case cannotOpen(path: String, reason: String)
    /// The database belongs to another tenant or user than the one opening it.
    case belongsToAnotherAccount(tenantId: String, userId: String)
    /// The ``KeyProvider`` could not give the tenant's key.
    case keyUnavailable(tenantId: String, reason: String)
    /// The tenant's key is not the one the database was sealed with (it was lost or replaced):
    /// sealed fields and queued writes cannot be read. Sign out with `force: true` to start afresh.
    case keyMismatch(tenantId: String)
    /// ``OfflineStoreConfiguration/databasePassphrase`` was given, but this build's SQLite cannot
    /// encrypt the database (GRDB is not built with SQLCipher): refused rather than ignored.
    case databaseEncryptionUnavailable(reason: String)
    /// The store was signed out (wiped); open a new one.
    case signedOut
    /// A ``StoreExtension`` given to the store collides with another, with a contract or with
    /// the store's own tables; or a feature needs an extension the store was not opened with.
    case invalidExtension(name: String, reason: String)

    // MARK: Contracts and values

    /// No entity or event contract of that name among the store's contracts (``OfflineStore/contracts``).
    case unknownContract(String)
    /// The contract has no field of that name.
    case unknownField(contract: String, field: String)
    /// The field cannot be used this way (filtering or sorting on an encrypted field).
    case fieldNotQueryable(contract: String, field: String, reason: String)
    /// A value does not satisfy the contract (type, enum values, `max_length`, required).
    case invalidValue(contract: String, field: String, reason: String)
    /// The contract does not let devices write it (direction `down`, `server_authoritative`,
    /// or an operation `append_only` refuses).
    case notWritable(contract: String, reason: String)
    /// No row with that primary key.
    case rowNotFound(contract: String, id: String)
    /// A row with that primary key already exists.
    case rowAlreadyExists(contract: String, id: String)
    /// A stored row could not be read back into its type.
    case unreadableRow(contract: String, id: String, reason: String)
    /// A sealed value could not be opened (tampered, or sealed under another key).
    case unsealFailed(table: String, column: String, id: String)
    /// A pulled row came with only its changed fields (`fields=changed`) and the device cannot
    /// merge them: it does not hold the row at the version they change, or wrote the row
    /// itself (an outbox entry of it). Nothing of the page is stored; the engine pulls it again with whole rows.
    case partialRowNotHeld(contract: String, id: String)

    // MARK: Outbox and retention

    /// The outbox holds writes older than the retention limit (14 days by default): the store
    /// refuses new writes until a sync succeeds. `since` is when the oldest unsynced write was made.
    case readOnlyUntilSync(since: Date)
    /// Signing out would lose writes that are not on the server yet; sync first or pass
    /// `force: true`.
    case pendingWrites(count: Int)
    /// No outbox entry with that `seq`.
    case outboxEntryNotFound(seq: Int64)
    /// The outbox entry is not in a state that allows this (for example retrying one that did
    /// not fail).
    case invalidOutboxState(seq: Int64, status: String, expected: [String])
    /// No conflict with that id, or it is already resolved.
    case conflictNotFound(id: Int64)
    /// The resolution does not fit the conflict (a merged row for another entity or id).
    case invalidResolution(reason: String)

    /// A ``SyncPreferences`` value out of range.
    case invalidPreference(String)

    // MARK: Storage

    /// SQLite failed (disk full, I/O error, a constraint). `code` is SQLite's extended result code.
    case database(code: Int32, message: String)
    /// A file operation on the store's folders failed.
    case fileSystem(path: String, reason: String)
    /// A file for a `file` field was refused (too large, of a type the field does not accept, no
    /// room for it) or is not in the store: nothing of it was kept (``FileError``).
    case file(FileError)

    /// What went wrong, for logs and the command-line device.
    public var description: String {
        switch self {
        case .createdByNewerBuild(let migrations):
            return "the offline database was written by a newer version of the app (unknown migrations: "
                + migrations.joined(separator: ", ") + "); update the app — the file was left untouched"
        case .notADatabase(let path): return "\(path) is not a SQLite database"
        case .cannotOpen(let path, let reason): return "cannot open \(path): \(reason)"
        case .belongsToAnotherAccount(let tenant, let user):
            return "the offline database belongs to user '\(user)' of tenant '\(tenant)'; sign that user out first"
        case .keyUnavailable(let tenant, let reason): return "no encryption key for tenant '\(tenant)': \(reason)"
        case .keyMismatch(let tenant):
            return "the encryption key of tenant '\(tenant)' is not the one the offline database was sealed with"
        case .databaseEncryptionUnavailable(let reason): return "the offline database cannot be encrypted: \(reason)"
        case .signedOut: return "the offline store was signed out; open a new one"
        case .invalidExtension(let name, let reason): return "store extension '\(name)': \(reason)"
        case .unknownContract(let name): return "no entity or event contract is named '\(name)'"
        case .unknownField(let contract, let field): return "\(contract) has no field '\(field)'"
        case .fieldNotQueryable(let contract, let field, let reason): return "\(contract).\(field) cannot be queried: \(reason)"
        case .invalidValue(let contract, let field, let reason): return "\(contract).\(field): \(reason)"
        case .notWritable(let contract, let reason): return "\(contract) cannot be written on a device: \(reason)"
        case .rowNotFound(let contract, let id): return "no \(contract) with id '\(id)'"
        case .rowAlreadyExists(let contract, let id): return "a \(contract) with id '\(id)' already exists"
        case .unreadableRow(let contract, let id, let reason): return "the stored \(contract) '\(id)' cannot be read: \(reason)"
        case .partialRowNotHeld(let contract, let id):
            return "the pulled \(contract) '\(id)' carries only its changed fields and this device does not hold the row they change"
        case .unsealFailed(let table, let column, let id):
            return "the sealed value \(table).\(column) of row '\(id)' cannot be opened (tampered, or another key)"
        case .readOnlyUntilSync(let since):
            return "writes are paused: changes made since \(since) have not reached the server; sync to continue"
        case .pendingWrites(let count):
            return "\(count) change(s) have not reached the server; sync first, or sign out with force: true to discard them"
        case .outboxEntryNotFound(let seq): return "no queued change with seq \(seq)"
        case .invalidOutboxState(let seq, let status, let expected):
            return "queued change \(seq) is \(status); this needs it to be \(expected.joined(separator: " or "))"
        case .conflictNotFound(let id): return "no open conflict with id \(id)"
        case .invalidResolution(let reason): return "invalid conflict resolution: \(reason)"
        case .invalidPreference(let reason): return "invalid sync preference: \(reason)"
        case .database(let code, let message): return "SQLite error \(code): \(message)"
        case .fileSystem(let path, let reason): return "file error at \(path): \(reason)"
        case .file(let error): return error.description
        }
    }
}

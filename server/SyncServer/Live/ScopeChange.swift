import NIOConcurrencyHelpers

/// A scope whose sequence a commit moved: what the live channel pokes devices about.
package struct ScopeChange: Hashable, Sendable {
    package var tenant: String
    package var scopeKey: String
    /// The scope's sequence after the commit.
    package var sequence: Int64

    package init(tenant: String, scopeKey: String, sequence: Int64) {
        self.tenant = tenant
        self.scopeKey = scopeKey
        self.sequence = sequence
    }
}

/// What a storage tells its commit observers (``SyncStorage/observeCommits(_:)``).
package enum CommitNotice: Hashable, Sendable {
    /// A commit moved these scopes.
    case changed([ScopeChange])
    /// Commits may have moved scopes without a notice (the storage was not listening for a
    /// while): whoever relies on notices must look again at everything.
    case mayHaveMissed
}

/// The observers a storage calls after each commit (``SyncStorage/observeCommits(_:)``).
final class CommitObservers: Sendable {
    private let observers = NIOLockedValueBox<[@Sendable (CommitNotice) -> Void]>([])

    func add(_ observer: @escaping @Sendable (CommitNotice) -> Void) {
        observers.withLockedValue { $0.append(observer) }
    }

    func notify(_ notice: CommitNotice) {
        for observer in observers.withLockedValue({ $0 }) { observer(notice) }
    }
}

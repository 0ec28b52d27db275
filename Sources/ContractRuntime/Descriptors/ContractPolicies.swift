/// Which way rows of a contract travel.
public enum SyncDirection: String, Hashable, Sendable, CaseIterable {
    /// Server to device only.
    case down
    /// Device to server only.
    case up
    /// Both ways.
    case both
}

/// How the server resolves concurrent writes to the same row.
public enum ConflictPolicy: String, Hashable, Sendable, CaseIterable {
    case appendOnly = "append_only"
    case serverAuthoritative = "server_authoritative"
    case lastWriterWins = "last_writer_wins"
    case versionCheck = "version_check"
    case fieldMerge = "field_merge"
}

/// What a device caches first when space is short.
public enum SyncPriority: String, Hashable, Sendable, CaseIterable, Comparable {
    case critical
    case high
    case normal
    case low

    private var rank: Int {
        switch self {
        case .critical: return 0
        case .high: return 1
        case .normal: return 2
        case .low: return 3
        }
    }

    /// Orders priorities from the one that syncs first.
    public static func < (lhs: SyncPriority, rhs: SyncPriority) -> Bool { lhs.rank < rhs.rank }
}

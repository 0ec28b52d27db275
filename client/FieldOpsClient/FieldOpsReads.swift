public import Contracts
public import SyncClient

/// The field operations app's reads: a team's tasks in route order and its incidents by
/// priority, on the store's typed API. Filters use the generated `Change` types, so a renamed
/// field fails to compile.
extension StoreReader {
    /// A team's tasks in route order (`sort_index`, then due date), optionally only one
    /// assignee's and only some statuses.
    public func tasks(
        teamId: String, assigneeId: String? = nil, statuses: [FieldTask.Status]? = nil
    ) throws(OfflineStoreError) -> [FieldTask] {
        var filter = RowFilter<FieldTask>.equals(.teamId(teamId))
        if let assigneeId { filter = filter && .equals(.assigneeId(assigneeId)) }
        if let statuses { filter = filter && .oneOf(statuses.map { .status($0) }) }
        return try all(FieldTask.self, where: filter, orderBy: [.ascending("sort_index"), .ascending("due_on")])
    }

    /// A team's incidents by priority (the contract's order: critical first), then newest
    /// first, optionally only some states.
    public func incidents(teamId: String, states: [Incident.State]? = nil) throws(OfflineStoreError) -> [Incident] {
        var filter = RowFilter<Incident>.equals(.teamId(teamId))
        if let states { filter = filter && .oneOf(states.map { .state($0) }) }
        return try all(Incident.self, where: filter, orderBy: [.declaredOrder("priority"), .descending("opened_at")])
    }
}

extension OfflineStore {
    /// A team's tasks in route order (``SyncClient/StoreReader/tasks(teamId:assigneeId:statuses:)``).
    public func tasks(
        teamId: String, assigneeId: String? = nil, statuses: [FieldTask.Status]? = nil
    ) throws(OfflineStoreError) -> [FieldTask] {
        try read { reader throws(OfflineStoreError) in try reader.tasks(teamId: teamId, assigneeId: assigneeId, statuses: statuses) }
    }

    /// A team's incidents by priority, then newest first.
    public func incidents(teamId: String, states: [Incident.State]? = nil) throws(OfflineStoreError) -> [Incident] {
        try read { reader throws(OfflineStoreError) in try reader.incidents(teamId: teamId, states: states) }
    }
}

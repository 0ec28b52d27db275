import ContractRuntime
import Contracts
import SyncProtocol
import SyncServer

/// Folds field-service events into the `Task` (``FieldTask``) status.
///
/// Transitions a status change may make:
///
/// | from | to |
/// | --- | --- |
/// | `assigned` | `en_route`, `in_progress`, `blocked`, `cancelled` |
/// | `en_route` | `assigned`, `in_progress`, `blocked`, `cancelled` |
/// | `in_progress` | `blocked`, `completed`, `cancelled` |
/// | `blocked` | `assigned`, `en_route`, `in_progress`, `cancelled` |
/// | `completed`, `cancelled` | nothing (final) |
///
/// - `TaskStarted` moves the task to `in_progress` (and sets `started_at` once).
/// - `TaskStatusChanged` applies `from_status → to_status` unless the task has moved on: the task
///   already in `to_status` is a `duplicate` (a second completion is not an error); a task no
///   longer in `from_status` is `conflicted` with the task's row; a transition the table does
///   not allow is `rejected` (`invalid_transition`).
/// - `BatterySwapCompleted` with a `task_id` completes the task from any open status (the swap
///   is evidence the work was done); an already completed task makes it a `duplicate`, a
///   cancelled one `invalid_transition`.
/// - An event naming a task that is not in the event's team is `rejected` (`row_not_found`).
///
/// Completing sets `completed_at` (and `started_at` when unset) to the device's time of the event.
struct FieldTaskReducer: Reducer {
    var sources: Set<String> {
        [TaskStarted.descriptor.name, TaskStatusChanged.descriptor.name, BatterySwapCompleted.descriptor.name]
    }

    typealias Status = FieldTask.Status

    static let transitions: [Status: Set<Status>] = [
        .assigned: [.enRoute, .inProgress, .blocked, .cancelled],
        .enRoute: [.assigned, .inProgress, .blocked, .cancelled],
        .inProgress: [.blocked, .completed, .cancelled],
        .blocked: [.assigned, .enRoute, .inProgress, .cancelled],
        .completed: [],
        .cancelled: [],
    ]

    static func allows(_ from: Status, _ to: Status) -> Bool { transitions[from]?.contains(to) == true }

    /// The task an event names and the status it asks for (`from` when the event states one).
    private struct Request {
        var taskID: String
        var from: Status?
        var to: Status
        /// Completion from any open status (a battery swap).
        var completesFromAnyOpenStatus = false
    }

    private func request(for fact: ReducerFact) throws -> Request? {
        switch fact.contract {
        case TaskStarted.descriptor.name:
            return Request(taskID: try fact.decode(TaskStarted.self).taskId, from: nil, to: .inProgress)
        case TaskStatusChanged.descriptor.name:
            let change = try fact.decode(TaskStatusChanged.self)
            return Request(
                taskID: change.taskId, from: Status(rawValue: change.fromStatus.rawValue) ?? .blocked,
                to: Status(rawValue: change.toStatus.rawValue) ?? .blocked
            )
        case BatterySwapCompleted.descriptor.name:
            guard let taskID = try fact.decode(BatterySwapCompleted.self).taskId else { return nil }
            return Request(taskID: taskID, from: nil, to: .completed, completesFromAnyOpenStatus: true)
        default:
            return nil
        }
    }

    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict {
        guard let request = try request(for: fact) else { return .proceed }
        guard let (task, row) = try await context.entity(FieldTask.self, id: request.taskID), row.text("_scope_key") == fact.scopeKey else {
            return .rejected(ErrorDetail(code: .rowNotFound, message: "task '\(request.taskID)' is not a task of this team"))
        }
        let current = task.status
        if current == request.to {
            return .duplicate("task '\(task.id)' is already \(current.rawValue)")
        }
        if let from = request.from, from != current {
            return .conflicted(entity: FieldTask.descriptor, row: row)
        }
        let allowed =
            request.completesFromAnyOpenStatus ? (current != .completed && current != .cancelled) : Self.allows(current, request.to)
        guard allowed else {
            return .rejected(
                ErrorDetail(
                    code: .invalidTransition,
                    message: "task '\(task.id)' cannot go from \(current.rawValue) to \(request.to.rawValue)",
                    details: .object(["from": .string(current.rawValue), "to": .string(request.to.rawValue)])
                )
            )
        }
        return .proceed
    }

    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        guard let request = try request(for: fact), let (stored, row) = try await context.entity(FieldTask.self, id: request.taskID) else {
            return []
        }
        var task = stored
        let from = task.status
        task.status = request.to
        if request.to == .inProgress || request.to == .completed, task.startedAt == nil { task.startedAt = fact.occurredAt }
        if request.to == .completed { task.completedAt = fact.occurredAt }
        let summary: [String: JSONValue] = ["from_status": .string(from.rawValue), "status": .string(request.to.rawValue)]
        let scopeKey = row.text("_scope_key") ?? fact.scopeKey
        return try await context.store(task, previous: row, scopeKey: scopeKey, summary: summary).map { [$0] } ?? []
    }
}

/// Folds field-service events into the `ServiceAsset` they name (in the event's team; an asset
/// the server does not hold is left alone, the event is still stored):
///
/// - `BatterySwapCompleted`: `battery_level` becomes `charge_after`, `last_seen_at` the event's
///   time, and an asset that `needs_service` is back `in_service`.
/// - `IssueLogged`: a `high` or `critical` issue, or a `safety` one, moves an asset that is
///   `in_service` to `needs_service`; `last_seen_at` becomes the event's time.
///
/// The asset's clocks are left as they are: a device's later last-writer-wins edit still wins.
struct ServiceAssetReducer: Reducer {
    var sources: Set<String> { [BatterySwapCompleted.descriptor.name, IssueLogged.descriptor.name] }

    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict { .proceed }

    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        let assetID: String
        var change: (inout ServiceAsset) -> Void
        switch fact.contract {
        case BatterySwapCompleted.descriptor.name:
            let swap = try fact.decode(BatterySwapCompleted.self)
            assetID = swap.serviceAssetId
            change = { asset in
                asset.batteryLevel = swap.chargeAfter
                if asset.status == .needsService { asset.status = .inService }
            }
        case IssueLogged.descriptor.name:
            let issue = try fact.decode(IssueLogged.self)
            assetID = issue.serviceAssetId
            change = { asset in
                let serious = issue.severity == .high || issue.severity == .critical || issue.category == .safety
                if serious, asset.status == .inService { asset.status = .needsService }
            }
        default:
            return []
        }
        guard let (stored, row) = try await context.entity(ServiceAsset.self, id: assetID), row.text("_scope_key") == fact.scopeKey else {
            return []
        }
        var asset = stored
        change(&asset)
        if asset.lastSeenAt.map({ $0 < fact.occurredAt }) ?? true { asset.lastSeenAt = fact.occurredAt }
        let summary: [String: JSONValue] = [
            "status": .string(asset.status.rawValue), "battery_level": asset.batteryLevel.map(JSONValue.double) ?? .null,
        ]
        return try await context.store(asset, previous: row, scopeKey: fact.scopeKey, summary: summary).map { [$0] } ?? []
    }
}

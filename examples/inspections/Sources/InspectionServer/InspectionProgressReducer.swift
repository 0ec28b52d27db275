import ContractRuntime
import InspectionContracts
import SyncProtocol
import SyncServer

/// Folds `ItemChecked` events into their ``Inspection``'s progress: `checked_count` (items with a
/// result), `failed_count` (items whose latest result is a fail) and `last_checked_at`.
///
/// The counts are recomputed from every stored check of the inspection rather than moved by one:
/// an item checked twice (a fail put right, then passed) counts once, by its latest result, and
/// checks from two devices arriving in either order give the same counts.
///
/// - An event naming an inspection that is not in the event's crew, or an item that is not on
///   that inspection's checklist, is `rejected` (`row_not_found`) and not stored.
/// - The inspection's field clocks are left as they are: an inspector's later edit of another
///   field still merges (``Inspection`` is `field_merge`).
struct InspectionProgressReducer: Reducer {
    var sources: Set<String> { [ItemChecked.descriptor.name] }

    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict {
        let check = try fact.decode(ItemChecked.self)
        guard let (_, row) = try await context.entity(Inspection.self, id: check.inspectionId), row.text("_scope_key") == fact.scopeKey else {
            return .rejected(ErrorDetail(code: .rowNotFound, message: "inspection '\(check.inspectionId)' is not an inspection of this crew"))
        }
        guard let (item, _) = try await context.entity(ChecklistItem.self, id: check.itemId), item.inspectionId == check.inspectionId else {
            return .rejected(
                ErrorDetail(code: .rowNotFound, message: "item '\(check.itemId)' is not on the checklist of inspection '\(check.inspectionId)'")
            )
        }
        return .proceed
    }

    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        let check = try fact.decode(ItemChecked.self)
        guard let (stored, row) = try await context.entity(Inspection.self, id: check.inspectionId) else { return [] }
        // The fact is stored before it is folded, so it is among these.
        let checks = try await context.events(ItemChecked.self, where: ["inspection_id": .text(check.inspectionId)])
        var latest: [String: (result: ItemChecked.Result, occurredAt: Int64, eventID: String)] = [:]
        for (event, eventID, occurredAt) in checks {
            // The later check of an item wins; the event id breaks a tie, so every server agrees.
            if let known = latest[event.itemId], (known.occurredAt, known.eventID) > (occurredAt, eventID) { continue }
            latest[event.itemId] = (event.result, occurredAt, eventID)
        }
        var inspection = stored
        inspection.checkedCount = Int64(latest.count)
        inspection.failedCount = Int64(latest.values.count { $0.result == .fail })
        inspection.lastCheckedAt = latest.values.map(\.occurredAt).max().map(Timestamp.init(millisecondsSince1970:))
        let summary: [String: JSONValue] = [
            "checked_count": .int(inspection.checkedCount), "failed_count": .int(inspection.failedCount),
        ]
        let scopeKey = row.text("_scope_key") ?? fact.scopeKey
        return try await context.store(inspection, previous: row, scopeKey: scopeKey, summary: summary).map { [$0] } ?? []
    }
}

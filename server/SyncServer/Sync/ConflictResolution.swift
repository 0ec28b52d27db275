import ContractRuntime
import Foundation
import SyncProtocol

/// The server side of the conflict policies (docs/contracts.md). The policy is always the contract's
/// (``EntityDescriptor/conflict``), never chosen by entity name, so a new contract gets the same
/// handling as the sample ones. Everything here is pure: it decides, ``PushService`` writes.
///
/// What each policy answers:
///
/// | policy | decision |
/// | --- | --- |
/// | `append_only` | `create` only; the same id again is `duplicate`, never a conflict; other operations are `rejected` (`not_writable`). |
/// | `server_authoritative` | devices never write it: `rejected` (`not_writable`). |
/// | `last_writer_wins` | every operation carries `hlc`; the later clock wins (the node id breaks ties, so two different writes never tie). The winner is `applied` — with resolution `won` when its `base_version` shows the row had moved on since the device read it; the loser is `conflicted` with resolution `lost` and the row that stands, and nothing is written. The same clock again is the same write: `duplicate`. A later write after a delete brings the row back. |
/// | `version_check` | `update`, `patch` and `delete` carry `base_version`; equal to the row's version → `applied`, otherwise `conflicted` with the server row and version for the device to resolve. A `create` of an existing id is `conflicted` too. |
/// | `field_merge` | a `patch` carries the changed fields, their `base` values and `hlc`. Per field: the server still holds the base → applied; it holds something else but that field's last writer (`_field_clocks`) is older than `hlc` → applied (last writer wins per field); otherwise the server's value is kept. Some fields kept → `applied` with resolution `merged` and the merged row; every field kept → `conflicted`, resolution `lost`. A whole-row `create`/`update` of an existing row merges the same way without a base. A `delete` always applies. |
///
/// Under `version_check` and `field_merge`, an edit of a deleted row is `conflicted` with
/// resolution `deleted` and no server row. Deletes of a deleted row are `duplicate`.
enum ConflictResolution {
    /// What a mutation brings, in column form.
    struct Input {
        var entity: EntityDescriptor
        var operation: MutationOperation
        /// The stored row (tombstones included), if any.
        var existing: StoredRow?
        /// Whole row for create/update; the changed fields for patch; empty for delete.
        var changes: [String: ColumnValue]
        /// `field_merge`: the changed fields' values before the edit.
        var base: [String: ColumnValue]?
        var baseVersion: Int64?
        var hlc: HybridLogicalClock?
    }

    /// What to do.
    enum Decision: Hashable, Sendable {
        /// Write the row with these contract columns.
        case write(Write)
        /// Already there; nothing to write.
        case duplicate(String)
        /// Not written: answer with the server row.
        case conflicted(resolution: String?)
    }

    struct Write: Hashable, Sendable {
        /// Every contract column of the row to store (the version field is stamped by the writer).
        var columns: [String: ColumnValue]
        var deleted: Bool
        var hlc: String?
        /// Canonical JSON `{field: hlc}`, for `field_merge`.
        var fieldClocks: String?
        var resolution: String?
        /// `field_merge`: fields taken from the mutation and fields where the server's value was kept.
        var appliedFields: [String] = []
        var keptFields: [String] = []
    }

    static let won = "won"
    static let lost = "lost"
    static let merged = "merged"
    static let deleted = "deleted"

    /// Refuses, before the payload is even read, what the policy never allows or what it needs
    /// and the mutation lacks.
    static func requirements(
        of entity: EntityDescriptor, operation: MutationOperation, mutation: Mutation
    ) -> ErrorDetail? {
        if entity.direction == .down {
            return ErrorDetail(code: .notWritable, message: "\(entity.name) travels from the server to devices only (direction down)")
        }
        switch entity.conflict {
        case .serverAuthoritative:
            return ErrorDetail(code: .notWritable, message: "\(entity.name) is server-authoritative: devices cannot write it")
        case .appendOnly:
            guard operation == .create else {
                return ErrorDetail(code: .notWritable, message: "\(entity.name) is append-only: rows are created, never changed or deleted")
            }
        case .lastWriterWins:
            if let problem = clockProblem(mutation.hlc, entity: entity, required: true) { return problem }
        case .versionCheck:
            if operation != .create, mutation.baseVersion == nil {
                return ErrorDetail(
                    code: .missingPolicyData,
                    message: "\(entity.name) uses version_check: \(operation.rawValue) needs the base_version it was based on"
                )
            }
            if let problem = clockProblem(mutation.hlc, entity: entity, required: false) { return problem }
        case .fieldMerge:
            if operation == .patch, mutation.base == nil {
                return ErrorDetail(
                    code: .missingPolicyData,
                    message: "\(entity.name) uses field_merge: a patch needs base, the values of the changed fields before the edit"
                )
            }
            if let problem = clockProblem(mutation.hlc, entity: entity, required: operation != .delete) { return problem }
        }
        if operation == .delete, !entity.tombstones {
            return ErrorDetail(
                code: .notWritable, message: "\(entity.name) rows are never deleted (tombstones: false): no deletion could reach other devices")
        }
        return nil
    }

    private static func clockProblem(_ text: String?, entity: EntityDescriptor, required: Bool) -> ErrorDetail? {
        guard let text else {
            guard required else { return nil }
            return ErrorDetail(
                code: .missingPolicyData,
                message: "\(entity.name) uses \(entity.conflict.rawValue): the mutation needs hlc, the device's hybrid logical clock at the edit"
            )
        }
        guard HybridLogicalClock(text) != nil else {
            return ErrorDetail(
                code: .invalidPayload,
                message: "hlc '\(text)' is not a hybrid logical clock (<15-digit millis>-<5-digit counter>-<node>)"
            )
        }
        return nil
    }

    /// Decides how a validated mutation meets the stored row.
    static func decide(_ input: Input) -> Decision {
        switch input.entity.conflict {
        case .appendOnly, .serverAuthoritative:
            // `requirements` refused everything but an append-only create.
            if input.existing != nil { return .duplicate("\(input.entity.name) rows are immutable; this id is already stored") }
            return .write(Write(columns: input.changes, deleted: false, hlc: input.hlc?.description))
        case .lastWriterWins:
            return lastWriterWins(input)
        case .versionCheck:
            return versionCheck(input)
        case .fieldMerge:
            return fieldMerge(input)
        }
    }

    // MARK: - Policies

    private static func lastWriterWins(_ input: Input) -> Decision {
        guard let hlc = input.hlc else { return .conflicted(resolution: nil) }  // refused earlier
        guard let existing = input.existing else {
            return .write(Write(columns: input.changes, deleted: false, hlc: hlc.description))
        }
        // Two deletes leave the same row whichever is later: the second is a duplicate, not a
        // loss the device would have to settle.
        if input.operation == .delete, existing.isDeleted { return .duplicate("the row is already deleted") }
        let current = existing.text("_hlc").flatMap(HybridLogicalClock.init)
        if let current {
            if current == hlc { return .duplicate("this write (hlc \(hlc)) is already applied") }
            if hlc < current { return .conflicted(resolution: lost) }
        }
        let resolution = input.baseVersion.map { $0 != existing.integer("_version") } == true ? won : nil
        return .write(
            Write(
                columns: columns(for: input, existing: existing), deleted: input.operation == .delete, hlc: hlc.description,
                resolution: resolution
            )
        )
    }

    /// A create of a deleted row based on the deletion's version: the device was shown the
    /// delete (a `deleted` conflict) and its user chose to keep their row, so it comes back.
    /// Any other write to a deleted row conflicts.
    private static func isRecreation(_ input: Input, of existing: StoredRow) -> Bool {
        input.operation == .create && input.baseVersion != nil && input.baseVersion == existing.integer("_version")
    }

    private static func versionCheck(_ input: Input) -> Decision {
        let hlc = input.hlc?.description
        guard let existing = input.existing else {
            return .write(Write(columns: input.changes, deleted: false, hlc: hlc))
        }
        if existing.isDeleted {
            if input.operation == .delete { return .duplicate("the row is already deleted") }
            if isRecreation(input, of: existing) { return .write(Write(columns: input.changes, deleted: false, hlc: hlc)) }
            return .conflicted(resolution: deleted)
        }
        guard input.operation != .create, let base = input.baseVersion, base == existing.integer("_version") else {
            return .conflicted(resolution: nil)
        }
        return .write(
            Write(
                columns: columns(for: input, existing: existing), deleted: input.operation == .delete,
                hlc: hlc ?? existing.text("_hlc")
            )
        )
    }

    private static func fieldMerge(_ input: Input) -> Decision {
        guard let existing = input.existing else {
            let clock = input.hlc?.description
            let clocks = clock.map { clock in Dictionary(uniqueKeysWithValues: mergeableFields(input).map { ($0, clock) }) }
            return .write(
                Write(
                    columns: input.changes, deleted: false, hlc: clock, fieldClocks: clocks.map(clocksText),
                    appliedFields: mergeableFields(input)
                )
            )
        }
        if existing.isDeleted {
            if input.operation == .delete { return .duplicate("the row is already deleted") }
            if isRecreation(input, of: existing) {
                let clock = input.hlc?.description
                let clocks = clock.map { clock in Dictionary(uniqueKeysWithValues: mergeableFields(input).map { ($0, clock) }) }
                return .write(
                    Write(
                        columns: input.changes, deleted: false, hlc: clock, fieldClocks: clocks.map(clocksText),
                        appliedFields: mergeableFields(input)
                    )
                )
            }
            return .conflicted(resolution: deleted)
        }
        var clocks = fieldClocks(existing)
        if input.operation == .delete {
            let top = [existing.text("_hlc").flatMap(HybridLogicalClock.init), input.hlc].compactMap { $0 }.max()
            return .write(
                Write(
                    columns: contractColumns(existing, input.entity), deleted: true, hlc: top?.description,
                    fieldClocks: clocksText(clocks)
                )
            )
        }
        guard let hlc = input.hlc else { return .conflicted(resolution: nil) }  // refused earlier
        let mergeable = Set(mergeableFields(input))
        let outcome = mergeFields(
            changes: input.changes.filter { mergeable.contains($0.key) }, base: input.base,
            server: Dictionary(uniqueKeysWithValues: mergeable.map { ($0, existing[$0]) }),
            clocks: clocks.filter { mergeable.contains($0.key) }.compactMapValues(HybridLogicalClock.init), hlc: hlc
        )
        if outcome.applied.isEmpty, !outcome.kept.isEmpty { return .conflicted(resolution: lost) }
        var columns = contractColumns(existing, input.entity)
        let clock = hlc.description
        for name in outcome.applied {
            columns[name] = input.changes[name]
            clocks[name] = clock
        }
        let top = [existing.text("_hlc").flatMap(HybridLogicalClock.init), hlc].compactMap { $0 }.max()
        return .write(
            Write(
                columns: columns, deleted: false, hlc: top?.description, fieldClocks: clocksText(clocks),
                resolution: outcome.kept.isEmpty ? nil : merged, appliedFields: outcome.applied, keptFields: outcome.kept
            )
        )
    }

    /// The per-field rule of `field_merge`, on its own so it can be tested alone.
    ///
    /// For each changed field: the server still holds the device's base value (or already the
    /// new value) → applied; otherwise the later writer of that field wins: applied when the
    /// field's clock is older than `hlc` (or unknown), kept when it is newer.
    static func mergeFields(
        changes: [String: ColumnValue], base: [String: ColumnValue]?, server: [String: ColumnValue],
        clocks: [String: HybridLogicalClock], hlc: HybridLogicalClock
    ) -> (applied: [String], kept: [String]) {
        var applied: [String] = []
        var kept: [String] = []
        for name in changes.keys.sorted() {
            let serverValue = server[name] ?? .null
            if serverValue == changes[name] || (base?[name]).map({ $0 == serverValue }) == true {
                applied.append(name)
            } else if let clock = clocks[name], clock > hlc {
                kept.append(name)
            } else {
                applied.append(name)
            }
        }
        return (applied, kept)
    }

    // MARK: - Helpers

    /// The contract columns of a stored row (no sync metadata).
    static func contractColumns(_ row: StoredRow, _ entity: EntityDescriptor) -> [String: ColumnValue] {
        var columns: [String: ColumnValue] = [:]
        columns.reserveCapacity(entity.fields.count)
        for field in entity.fields { columns[field.name] = row[field.name] }
        return columns
    }

    /// The row a whole-row or partial write leaves: a patch overlays the stored row; a delete keeps it.
    private static func columns(for input: Input, existing: StoredRow) -> [String: ColumnValue] {
        switch input.operation {
        case .create, .update, .event: return input.changes
        case .delete: return contractColumns(existing, input.entity)
        case .patch:
            var columns = contractColumns(existing, input.entity)
            for (name, value) in input.changes { columns[name] = value }
            return columns
        }
    }

    /// The fields a merge compares: every changed field but the primary key and the version field.
    private static func mergeableFields(_ input: Input) -> [String] {
        input.changes.keys.filter { $0 != input.entity.primaryKey && $0 != input.entity.versionField }.sorted()
    }

    /// A row's per-field clocks (`{}` for none). Read for every merged row: the package's JSON
    /// parser, not `JSONDecoder`, which cost more than the rest of the merge.
    static func fieldClocks(_ row: StoredRow) -> [String: String] {
        guard let text = row.text("_field_clocks"), case .object(let members)? = JSONParser.parse(text) else { return [:] }
        return members.compactMapValues { value in
            guard case .string(let clock) = value else { return nil }
            return clock
        }
    }

    static func clocksText(_ clocks: [String: String]) -> String {
        CanonicalJSON.text(.object(clocks.mapValues(JSONValue.string)))
    }
}

import ContractRuntime
import Contracts
import SyncClient

/// How a conflict is shown: by `conflicts`, and by `sync` for the ones it opened.
enum ConflictRendering {
    /// The fields whose values differ between the device's row and the server's (the primary key
    /// and the version field left out: one never differs, the other always does).
    static func differences(_ conflict: ConflictRecord) -> [(field: String, mine: JSONValue?, theirs: JSONValue?)] {
        let entity = ContractRegistry.entity(named: conflict.entity)
        let mine = conflict.localRow ?? [:]
        let theirs = conflict.serverRow ?? [:]
        // Contract fields only: the server's row also carries sync metadata such as `_server_version`.
        let fields = entity?.fields.filter { !$0.isPrimaryKey && !$0.isVersionField }.map(\.name)
        let names = (fields.map(Set.init) ?? Set(mine.keys).union(theirs.keys)).filter { !$0.hasPrefix("_") }.sorted()
        return names.compactMap { name in
            let (left, right) = (mine[name] ?? .null, theirs[name] ?? .null)
            return left == right ? nil : (name, mine[name], theirs[name])
        }
    }

    /// Whether the conflict is about a submitted attempt (the assessment moved on, or was deleted).
    static func isAttempt(_ conflict: ConflictRecord) -> Bool { conflict.entity == AttemptSubmitted.descriptor.name }

    /// The assessment revision the server's row of an attempt conflict holds.
    static func currentRevision(_ conflict: ConflictRecord) -> Int64? {
        if case .int(let revision)? = conflict.serverRow?["revision"] { return revision }
        return nil
    }

    /// Why the server did not take the change, in words.
    static func reason(_ conflict: ConflictRecord) -> String {
        if isAttempt(conflict) {
            guard conflict.serverRow != nil else {
                return "the assessment was deleted on the server; the answers are kept on this device"
            }
            let title = conflict.serverRow?["title"].flatMap { if case .string(let text) = $0 { text } else { nil } }
            return "\(title.map { "\"\($0)\"" } ?? "the assessment") moved to revision \(currentRevision(conflict).map(String.init) ?? "?") "
                + "since the attempt was taken"
        }
        let policy = ContractRegistry.entity(named: conflict.entity)?.conflict
        switch (conflict.serverResolution, policy) {
        case ("deleted"?, _): return "deleted on the server"
        case ("lost"?, _): return "another device's later edit stands (last writer wins)"
        case (_, .versionCheck?):
            return "changed on the server since this device read it" + (conflict.serverVersion.map { " (now version \($0))" } ?? "")
        default: return "the server's row moved on"
        }
    }

    static func lines(_ conflict: ConflictRecord) -> [String] {
        var lines = ["conflict \(conflict.id)  \(conflict.entity) \(conflict.rowId) (\(conflict.op.rawValue)): \(reason(conflict))"]
        for difference in isAttempt(conflict) ? [] : differences(conflict) {
            lines.append("    \(difference.field): mine \(Wording.value(difference.mine)), theirs \(Wording.value(difference.theirs))")
        }
        if let resolution = conflict.resolution {
            let how: String
            switch resolution {
            case .takeTheirs: how = "the server's row was taken"
            case .keepMine: how = "this device's row was sent again"
            case .merged: how = "a merged row was sent"
            case .discarded: how = "given up"
            }
            lines.append("    resolved: " + how)
        } else if isAttempt(conflict) {
            lines.append(
                conflict.serverRow == nil
                    ? "    resolve with: sync-device resolve \(conflict.id) discard [--export FILE]"
                    : "    resolve with: sync-device resolve \(conflict.id) submit-anyway|retake"
                        + "  (submit anyway: graded against the revision taken; retake: start again on the new revision)"
            )
        } else {
            lines.append("    resolve with: sync-device resolve \(conflict.id) mine|theirs")
        }
        return lines
    }

    static func json(_ conflict: ConflictRecord) -> JSONValue {
        var differences: [String: JSONValue] = [:]
        for difference in isAttempt(conflict) ? [] : self.differences(conflict) {
            differences[difference.field] = .object(["mine": difference.mine ?? .null, "theirs": difference.theirs ?? .null])
        }
        return .object([
            "id": .int(conflict.id), "seq": .int(conflict.seq), "entity": .string(conflict.entity), "row_id": .string(conflict.rowId),
            "op": .string(conflict.op.rawValue), "reason": .string(reason(conflict)),
            "server_version": conflict.serverVersion.map(JSONValue.int) ?? .null,
            "server_resolution": conflict.serverResolution.map(JSONValue.string) ?? .null,
            "resolution": conflict.resolution.map { .string($0.rawValue) } ?? .null,
            "detected_at": .string(conflict.detectedAt.iso8601), "resolved_at": conflict.resolvedAt.json,
            "mine": conflict.localRow.map(JSONValue.object) ?? .null, "theirs": conflict.serverRow.map(JSONValue.object) ?? .null,
            "differences": .object(differences),
        ])
    }
}

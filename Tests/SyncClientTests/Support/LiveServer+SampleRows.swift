import ContractRuntime
import Contracts
import Foundation
import SyncProtocol

/// Rows of the sample's contracts written straight into the live server's storage.
extension LiveServer {
    /// Writes an incident of `team`, as a push would.
    func storeIncident(_ id: String, team: String = "team-1", assignee: String? = nil, asset: String? = nil, title: String = "Broken") async throws {
        var fields: [String: JSONValue] = [
            "id": .string(id), "team_id": .string(team), "number": .string("INC-\(id)"), "short_description": .string(title),
            "state": .string("new"), "opened_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
        ]
        if let assignee { fields["assignee_id"] = .string(assignee) }
        if let asset { fields["service_asset_id"] = .string(asset) }
        try await storeRow(Incident.descriptor, fields, scopeKey: "ops:team:\(team)")
    }
}

import ContractRuntime

extension RowShaping {
    /// ``wireEvent(_:event:version:plan:)`` written as a JSON object, keys sorted, without
    /// building it first: the same bytes as `json.value(.object(wireEvent(…)))`. The payload is
    /// the plan's ``Plan/write(_:positions:into:)``, so a `json`, `list` or `file` field is copied
    /// as the canonical text it is stored as rather than parsed into a tree and written again
    /// (which cost a pull of events naming files a tenth more than the same rows without).
    ///
    /// - Parameter positions: the plan's ``Plan/positions(in:)`` for the row's layout.
    static func writeEvent(
        _ row: StoredRow, event: EventDescriptor, version: Int, plan: Plan, positions: [Int?], into json: inout JSONWriter
    ) {
        let shapedVersion = event.knownFields(forSchemaVersion: version) == nil ? event.currentVersion : version
        func text(_ column: String) {
            if let value = row.text(column) { json.string(value) } else { json.null() }
        }
        func timestamp(_ column: String) {
            if let millis = row.integer(column) { json.timestamp(millis) } else { json.null() }
        }
        var first = true
        json.append(0x7B)
        json.member(EnvelopeKeys.deviceID, first: &first)
        text("device_id")
        json.member(EnvelopeKeys.eventID, first: &first)
        text("event_id")
        json.member(EnvelopeKeys.hash, first: &first)
        text("hash")
        json.member(EnvelopeKeys.occurredAt, first: &first)
        timestamp("occurred_at")
        json.member(EnvelopeKeys.payload, first: &first)
        plan.write(row, positions: positions, into: &json)
        json.member(EnvelopeKeys.recordedAt, first: &first)
        timestamp("recorded_at")
        json.member(EnvelopeKeys.schemaVersion, first: &first)
        json.int(Int64(shapedVersion))
        json.member(EnvelopeKeys.type, first: &first)
        json.string(event.name)
        json.member(EnvelopeKeys.userID, first: &first)
        text("user_id")
        json.append(0x7D)
    }

    /// The members of a wire event, in the (sorted) order ``writeEvent(_:event:version:plan:positions:into:)`` writes them.
    private enum EnvelopeKeys {
        static let deviceID = JSONWriter.key("device_id")
        static let eventID = JSONWriter.key("event_id")
        static let hash = JSONWriter.key("hash")
        static let occurredAt = JSONWriter.key("occurred_at")
        static let payload = JSONWriter.key("payload")
        static let recordedAt = JSONWriter.key("recorded_at")
        static let schemaVersion = JSONWriter.key("schema_version")
        static let type = JSONWriter.key("type")
        static let userID = JSONWriter.key("user_id")
    }
}

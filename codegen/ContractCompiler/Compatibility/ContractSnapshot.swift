import Crypto
import Foundation

/// The normalized form of one contract version, as `contracts.lock` records it: the contract
/// language itself, with every setting written out, in a fixed order, without prose (summary,
/// doc) or allowances. Two versions are the same schema exactly when their snapshots are equal.
///
/// Because a snapshot is contract YAML, the lock is read back with the same decoder as the
/// contracts, and diagnostics can point at the locked version's line.
package enum ContractSnapshot {
    /// The snapshot text, unindented, one line per key or field, ending with a newline.
    package static func text(_ contract: Contract, set: ContractSet? = nil) -> String {
        var lines: [String] = []
        lines.append("\(contract.kind.rawValue): \(contract.name)")
        lines.append("version: \(contract.version)")
        lines.append("oldest_supported: \(contract.oldestSupported)")
        lines.append("table: \(contract.table)")
        lines.append("scope: \(contract.scope)")
        if contract.swiftName != contract.name { lines.append("swift_name: \(contract.swiftName)") }
        if let mode = contract.compatibility { lines.append("compatibility: \(mode.rawValue)") }
        if let appliesTo = contract.appliesTo { lines.append("applies_to: \(appliesTo)") }
        // Written only when set, like the storage limits below: versions released before the
        // key existed keep their snapshots and checksums.
        if let bytes = contract.maxBytes { lines.append("max_bytes: \(sizeText(bytes))") }
        if contract.isSigned { lines.append("signed: true") }
        let sync = contract.sync
        if contract.kind == .entity {
            let retention = sync.retentionSeconds.map(durationText) ?? "forever"
            // The storage limits are device cache policy like retention and priority, and part of
            // the released schema like them (changing one is a new version). They are written only
            // when set, so that the snapshots of versions released before the keys existed, and
            // with them the checksums in contracts.lock, stay as they were.
            var limits = ""
            if let rows = sync.maxRows { limits += ", max_rows: \(rows)" }
            if let bytes = sync.maxRowBytes { limits += ", max_row_bytes: \(sizeText(bytes))" }
            lines.append(
                "sync: { direction: \(sync.direction.rawValue), conflict: \(sync.conflict.rawValue), tombstones: \(sync.tombstones), retention: \(retention), priority: \(sync.priority.rawValue)\(limits) }"
            )
        } else {
            lines.append("sync: { direction: \(sync.direction.rawValue), conflict: \(sync.conflict.rawValue) }")
        }
        lines.append(contract.fields.isEmpty ? "fields: {}" : "fields:")
        lines += contract.fields.map { "  " + fieldLine($0) }
        if !contract.localFields.isEmpty {
            lines.append("local:")
            lines += contract.localFields.map { "  " + fieldLine($0) }
        }
        if !contract.relations.isEmpty {
            lines.append("relations:")
            for relation in contract.relations {
                lines.append("  \(relation.name): { \(relation.kind.rawValue): \(relation.target), foreign_key: \(relation.foreignKey) }")
            }
        }
        if !contract.indexes.isEmpty {
            lines.append("indexes:")
            for index in contract.indexes {
                lines.append("  - { fields: [\(index.fields.joined(separator: ", "))], unique: \(index.isUnique) }")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A duration in the largest unit that divides it: `2592000` → `30d`.
    private static func durationText(_ seconds: Int) -> String {
        for (unit, size) in [("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60)] where seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }

    /// A size in the largest decimal unit that divides it: `10000000` → `10MB`, `1500` → `1500B`.
    static func sizeText(_ bytes: Int) -> String {
        for (unit, size) in [("GB", 1_000_000_000), ("MB", 1_000_000), ("kB", 1_000)] where bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)B"
    }

    /// SHA-256 (hex) of the snapshot text.
    package static func checksum(_ contract: Contract) -> String {
        sha256Hex(text(contract))
    }

    package static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    private static func fieldLine(_ field: Field) -> String {
        var parts = ["type: \(typeSpelling(field))"]
        switch field.type.type {
        case .enumeration(let values, let fallback), .list(.enumeration(let values, let fallback)):
            parts.append("values: [\(values.joined(separator: ", "))]")
            if let fallback { parts.append("fallback: \(fallback)") }
        default:
            break
        }
        if let value = field.defaultValue { parts.append("default: \(yaml(value, type: field.type.type))") }
        if field.since != 1 { parts.append("since: \(field.since)") }
        if let rename = field.renamedFrom { parts.append("renamed_from: { name: \(rename.name), version: \(rename.version) }") }
        if let reason = field.deprecated { parts.append("deprecated: \(DefaultParser.quote(reason))") }
        if field.isEncrypted { parts.append("encrypted: true") }
        if field.isServerOnly { parts.append("server_only: true") }
        if let maxLength = field.maxLength { parts.append("max_length: \(maxLength)") }
        if let maxBytes = field.maxBytes { parts.append("max_bytes: \(sizeText(maxBytes))") }
        // Quoted: `*/*` would start a YAML alias. Only files have them, so no other snapshot changes.
        if field.type.type == .file { parts.append("content_types: [\(field.contentTypes.map(DefaultParser.quote).joined(separator: ", "))]") }
        if field.isPrimaryKey { parts.append("primary_key: true") }
        if field.isVersionField { parts.append("version_field: true") }
        return "\(field.name): { \(parts.joined(separator: ", ")) }"
    }

    private static func typeSpelling(_ field: Field) -> String {
        field.type.spelling
    }

    /// A default as YAML the contract decoder reads back to the same value.
    private static func yaml(_ value: DefaultValue, type: FieldType) -> String {
        switch (type, value) {
        case (_, .null): return "null"
        case (.timestamp, .int(let millis)): return DefaultParser.quote(TypeMapping.iso8601(millis))
        case (.list(let element), .array(let items)): return "[" + items.map { yaml($0, type: element) }.joined(separator: ", ") + "]"
        case (.json, _): return jsonYAML(value)
        case (_, .bool(let flag)): return flag ? "true" : "false"
        case (_, .int(let number)): return String(number)
        case (_, .double(let number)): return "\(number)"
        case (_, .string(let text)): return DefaultParser.quote(text)
        case (_, .array(let items)): return "[" + items.map(jsonYAML).joined(separator: ", ") + "]"
        case (_, .object): return jsonYAML(value)
        }
    }

    private static func jsonYAML(_ value: DefaultValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return "\(number)"
        case .string(let text): return DefaultParser.quote(text)
        case .array(let items): return "[" + items.map(jsonYAML).joined(separator: ", ") + "]"
        case .object(let members):
            if members.isEmpty { return "{}" }
            return "{ " + members.keys.sorted().map { DefaultParser.quote($0) + ": " + jsonYAML(members[$0]!) }.joined(separator: ", ") + " }"
        }
    }
}

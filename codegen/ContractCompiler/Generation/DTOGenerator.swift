import Foundation

/// Renders one contract into its Swift file: the DTO, its nested enums, explicit Codable,
/// and (for events) the envelope alias.
struct DTOGenerator {
    let set: ContractSet
    let mapping: TypeMapping

    init(set: ContractSet) {
        self.set = set
        self.mapping = TypeMapping(set: set)
    }

    func render(_ contract: Contract) -> String {
        var writer = CodeWriter()
        writer.line("public import ContractRuntime")
        if usesFoundation(contract) { writer.line("public import Foundation") }
        writer.line()
        writer.doc(contract.summary.isEmpty ? "The \(contract.name) \(contract.kind.rawValue)." : contract.summary)
        if let doc = contract.doc {
            writer.line("///")
            writer.doc(doc)
        }
        writer.line("///")
        writer.line(
            "/// - Remark: Generated from \(contract.kind.rawValue) `\(contract.name)` version \(contract.version) (`\(contract.sourcePath)`).")
        writer.block("public struct \(contract.swiftName): \(conformances(contract).joined(separator: ", "))") { w in
            renderProperties(contract.deviceFields, into: &w)
            w.line()
            renderInitializer(contract.deviceFields, into: &w)
            renderEnums(contract.deviceFields + contract.localFields, into: &w)
            if contract.kind == .entity, !contract.localFields.isEmpty {
                w.line()
                renderLocalState(contract, into: &w)
            }
            if contract.kind == .entity {
                w.line()
                renderChanges(contract, into: &w)
            }
            w.line()
            renderCodable(contract.deviceFields, into: &w)
            w.line()
            if contract.kind == .entity {
                w.line("public static var descriptor: EntityDescriptor { ContractRegistry.\(Self.descriptorName(contract)) }")
                w.line()
                w.line("public var contractPrimaryKey: String { \(primaryKeyText(contract)) }")
            } else {
                w.line("public static var descriptor: EventDescriptor { ContractRegistry.\(Self.descriptorName(contract)) }")
            }
        }
        if contract.kind == .event {
            writer.line()
            writer.line("/// An `\(contract.name)` event with its envelope (id, device, time, hash).")
            writer.line("public typealias \(contract.swiftName)Envelope = EventEnvelope<\(contract.swiftName)>")
        }
        return writer.text
    }

    /// The protocols a contract's type conforms to. Declared here, with the type, so the engines
    /// take every entity through them and no hand-kept list of the contracts can fall behind.
    private func conformances(_ contract: Contract) -> [String] {
        guard contract.kind == .entity else { return ["ContractEvent"] }
        return ["ContractEntity", "PatchableEntity"] + (contract.localFields.isEmpty ? [] : ["LocalStateEntity"])
    }

    /// The value to encode for a field. UUIDs go on the wire in lowercase, the canonical form
    /// (Foundation's `UUID` would encode uppercase), so ids compare equal on every platform.
    private func wireExpression(_ name: String, _ field: Field) -> String {
        var type = field.type.type
        if case .ref(let target) = type, let key = mapping.refKeyType(target) { type = key }
        if case .list(.ref(let target)) = type, let key = mapping.refKeyType(target) { type = .list(key) }
        let optional = field.type.isOptional ? "?" : ""
        switch type {
        case .uuid: return "\(name)\(optional).uuidString.lowercased()"
        case .list(.uuid): return "\(name)\(optional).map { $0.uuidString.lowercased() }"
        default: return name
        }
    }

    /// Whether the DTO's public API names a Foundation type (`UUID`, `Data`).
    private func usesFoundation(_ contract: Contract) -> Bool {
        func needs(_ type: FieldType) -> Bool {
            switch type {
            case .uuid, .bytes: return true
            case .list(let element): return needs(element)
            case .ref(let target): return mapping.refKeyType(target).map(needs) ?? false
            default: return false
            }
        }
        return (contract.deviceFields + contract.localFields).contains { needs($0.type.type) }
    }

    /// The registry property holding a contract's descriptor: `Unit` → `unit`.
    static func descriptorName(_ contract: Contract) -> String {
        let camel = Names.camelCase(Names.snakeCase(contract.name))
        return Names.swiftKeywords.contains(camel) ? camel + "Contract" : camel
    }

    private func primaryKeyText(_ contract: Contract) -> String {
        guard let key = contract.primaryKey else { return "\"\"" }
        let name = Names.camelCase(key.name)
        switch key.type.type {
        case .uuid: return "\(name).uuidString.lowercased()"
        case .int: return "String(\(name))"
        default: return name
        }
    }

    private func renderProperties(_ fields: [Field], into w: inout CodeWriter) {
        for (offset, field) in fields.enumerated() {
            if offset > 0, fieldDoc(field) != nil || fieldDoc(fields[offset - 1]) != nil { w.line() }
            w.doc(fieldDoc(field))
            w.line("public var \(Names.camelCase(field.name)): \(mapping.swiftOptionalType(field))")
        }
    }

    private func fieldDoc(_ field: Field) -> String? {
        var parts: [String] = []
        if let doc = field.doc { parts.append(doc) }
        var facts: [String] = []
        if field.isPrimaryKey { facts.append("Primary key.") }
        if field.isVersionField { facts.append("Version field.") }
        if field.since > 1 { facts.append("Since version \(field.since).") }
        if let rename = field.renamedFrom { facts.append("Called `\(rename.name)` before version \(rename.version).") }
        if field.isEncrypted { facts.append("Encrypted at rest on the device.") }
        if let maxLength = field.maxLength {
            facts.append(
                "At most \(maxLength) \(field.type.type == .bytes ? "bytes" : field.type.type.spelling.hasPrefix("list") ? "items" : "characters").")
        }
        if field.type.type == .file {
            let types = field.contentTypes.map { "`\($0)`" }.joined(separator: ", ")
            facts.append("A file of at most \(field.maxBytes.map(ContractSnapshot.sizeText) ?? "?"), of type \(types).")
        } else if let maxBytes = field.maxBytes {
            facts.append("At most \(maxBytes) bytes as stored.")
        }
        if !facts.isEmpty { parts.append(facts.joined(separator: " ")) }
        // A doc warning rather than `@available(deprecated)`: the generated Codable must keep
        // reading and writing the field without warnings while older devices still send it.
        if let reason = field.deprecated { parts.append("- Warning: Deprecated: \(reason)") }
        return parts.isEmpty ? nil : parts.joined(separator: "\n\n")
    }

    private func renderInitializer(_ fields: [Field], into w: inout CodeWriter) {
        let parameters = fields.map { field -> String in
            var text = "\(Names.camelCase(field.name)): \(mapping.swiftOptionalType(field))"
            if let value = mapping.swiftDefault(field) {
                text += " = " + value
            } else if field.type.isOptional {
                text += " = nil"
            }
            return text
        }
        if fields.isEmpty {
            w.line("public init() {}")
            return
        }
        w.line("public init(")
        w.indent { w in
            for (index, parameter) in parameters.enumerated() {
                w.line(parameter + (index == parameters.count - 1 ? "" : ","))
            }
        }
        w.block(")") { w in
            for field in fields {
                let name = Names.camelCase(field.name)
                w.line("self.\(name) = \(name)")
            }
        }
    }

    private func renderEnums(_ fields: [Field], into w: inout CodeWriter) {
        for field in fields {
            let values: [String], fallback: String?
            switch field.type.type {
            case .enumeration(let v, let f), .list(.enumeration(let v, let f)):
                (values, fallback) = (v, f)
            default:
                continue
            }
            w.line()
            w.line("/// The values of `\(field.name)`.")
            if let fallback {
                w.line("///")
                w.line("/// A value this build does not know decodes as `.\(TypeMapping.enumCaseName(fallback))`.")
            }
            w.block("public enum \(mapping.enumTypeName(field)): String, Codable, Sendable, Hashable, CaseIterable") { w in
                for value in values {
                    let name = TypeMapping.enumCaseName(value)
                    let bare = name.trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                    w.line(bare == value ? "case \(name)" : "case \(name) = \(SwiftLiteral.string(value))")
                }
                if let fallback {
                    w.line()
                    w.block("public init(from decoder: any Decoder) throws") { w in
                        w.line("let raw = try decoder.singleValueContainer().decode(String.self)")
                        w.line("self = Self(rawValue: raw) ?? .\(TypeMapping.enumCaseName(fallback))")
                    }
                }
            }
        }
    }

    /// `Change`: one field set to a typed value, so a patch is built from the contract's own
    /// types and never by hand (`[.title("New title"), .description(nil)]`).
    private func renderChanges(_ contract: Contract, into w: inout CodeWriter) {
        let fields = contract.deviceFields.filter { !$0.isPrimaryKey }
        w.line("/// One field of `\(contract.swiftName)` set to a new value, for a patch:")
        if let example = fields.first {
            w.line("/// `[.\(Names.camelCase(example.name))(…)]`. The primary key is not a change.")
        }
        guard !fields.isEmpty else {
            w.line("public enum Change: EntityFieldChange {")
            w.indent { w in
                w.line("public var fieldName: String { switch self {} }")
                w.line("public func wireValue() throws -> JSONValue { switch self {} }")
            }
            w.line("}")
            return
        }
        w.block("public enum Change: EntityFieldChange") { w in
            for field in fields {
                w.line("case \(Names.camelCase(field.name))(\(mapping.swiftOptionalType(field)))")
            }
            w.line()
            w.line("/// The field's wire name.")
            w.block("public var fieldName: String") { w in
                w.line("switch self {")
                for field in fields {
                    w.line("case .\(Names.camelCase(field.name)): return \(SwiftLiteral.string(field.name))")
                }
                w.line("}")
            }
            w.line()
            w.line("/// The new value as it goes on the wire.")
            w.block("public func wireValue() throws -> JSONValue") { w in
                w.line("switch self {")
                for field in fields {
                    w.line("case .\(Names.camelCase(field.name))(let value): return try JSONValue(encoding: \(wireExpression("value", field)))")
                }
                w.line("}")
            }
        }
    }

    private func renderLocalState(_ contract: Contract, into w: inout CodeWriter) {
        w.line("/// Client-only columns of `\(contract.table)`: never on the wire, never on the server.")
        w.block("public struct LocalState: Codable, Sendable, Hashable") { w in
            renderProperties(contract.localFields, into: &w)
            w.line()
            renderInitializer(contract.localFields, into: &w)
            w.line()
            renderCodable(contract.localFields, into: &w)
        }
    }

    private func renderCodable(_ fields: [Field], into w: inout CodeWriter) {
        w.block("enum CodingKeys: String, CodingKey") { w in
            for field in fields {
                let name = Names.camelCase(field.name)
                w.line(name == field.name ? "case \(name)" : "case \(name) = \(SwiftLiteral.string(field.name))")
            }
        }
        w.line()
        w.doc("Decodes the wire form; a missing key with a default in the contract takes the default.")
        w.block("public init(from decoder: any Decoder) throws") { w in
            w.line("let container = try decoder.container(keyedBy: CodingKeys.self)")
            for field in fields {
                let name = Names.camelCase(field.name)
                let type = mapping.swiftType(field)
                if field.type.isOptional {
                    w.line("\(name) = try container.decodeIfPresent(\(type).self, forKey: .\(name))")
                } else if let value = mapping.swiftDefault(field) {
                    w.line("\(name) = try container.decodeIfPresent(\(type).self, forKey: .\(name)) ?? \(value)")
                } else {
                    w.line("\(name) = try container.decode(\(type).self, forKey: .\(name))")
                }
            }
        }
        w.line()
        w.block("public func encode(to encoder: any Encoder) throws") { w in
            w.line("var container = encoder.container(keyedBy: CodingKeys.self)")
            for field in fields {
                let name = Names.camelCase(field.name)
                let call = field.type.isOptional ? "encodeIfPresent" : "encode"
                w.line("try container.\(call)(\(wireExpression(name, field)), forKey: .\(name))")
            }
        }
    }
}

/// Renders the contract registry: a descriptor per contract, the scopes, and lists of every
/// entity, event and generated type, which client and server read instead of hard-coding names.
struct RegistryGenerator {
    let set: ContractSet
    let mapping: TypeMapping
    let history: [String: [Contract]]

    init(set: ContractSet, history: [String: [Contract]] = [:]) {
        self.set = set
        self.mapping = TypeMapping(set: set)
        self.history = history
    }

    /// The fields a device at each supported version knows: released versions as the lock
    /// records them, other versions derived from `since` and `renamed_from`.
    func knownFields(_ contract: Contract) -> [(version: Int, fields: [(wire: String, current: String?)])] {
        func oldName(_ field: Field, at version: Int) -> String {
            if let rename = field.renamedFrom, version < rename.version { return rename.name }
            return field.name
        }
        return (contract.oldestSupported...contract.version).map { version in
            if version < contract.version, let released = history[contract.name]?.first(where: { $0.version == version }) {
                let fields = released.deviceFields.map { old -> (String, String?) in
                    (old.name, contract.deviceFields.first { oldName($0, at: version) == old.name }?.name)
                }
                return (version, fields)
            }
            let fields = contract.deviceFields.filter { $0.since <= version }.map { (oldName($0, at: version), Optional($0.name)) }
            return (version, fields)
        }
    }

    private func renderKnownFields(_ contract: Contract, trailingComma: Bool, into w: inout CodeWriter) {
        w.line("knownFieldsByVersion: [")
        w.indent { w in
            for (version, fields) in knownFields(contract) {
                w.line("\(version): [")
                w.indent { w in
                    for field in fields {
                        w.line(
                            "KnownField(wireName: \(SwiftLiteral.string(field.wire)), currentName: \(field.current.map(SwiftLiteral.string) ?? "nil")),"
                        )
                    }
                }
                w.line("],")
            }
        }
        w.line("]" + (trailingComma ? "," : ""))
    }

    func render() -> String {
        var w = CodeWriter()
        w.line("public import ContractRuntime")
        w.line()
        w.line("/// Every contract of the project, as data.")
        w.line("///")
        w.line("/// Client and server look tables, scopes, policies and versions up here instead of")
        w.line("/// hard-coding them, so a contract change reaches both through `contractc generate`.")
        w.block("public enum ContractRegistry: ContractSchema") { w in
            w.line("/// The sync scopes of the manifest.")
            w.line("public static let scopes: [ScopeDescriptor] = [")
            w.indent { w in
                for scope in set.manifest.scopes.sorted(by: { $0.name < $1.name }) {
                    w.line(
                        "ScopeDescriptor(name: \(SwiftLiteral.string(scope.name)), keyTemplate: \(SwiftLiteral.string(scope.key)), access: .\(scope.access == .read ? "read" : "readWrite")),"
                    )
                }
            }
            w.line("]")
            w.line()
            SubscriptionGenerator(set: set).renderRegistryProperty(into: &w, kinds: kindExpression)
            w.line()
            w.line("/// Every entity, by name.")
            w.line("public static let entities: [EntityDescriptor] = [")
            w.indent { w in
                for contract in set.entities { w.line("\(DTOGenerator.descriptorName(contract)),") }
            }
            w.line("]")
            w.line()
            w.line("/// Every event, by name.")
            w.line("public static let events: [EventDescriptor] = [")
            w.indent { w in
                for contract in set.events { w.line("\(DTOGenerator.descriptorName(contract)),") }
            }
            w.line("]")
            w.line()
            w.line("/// The generated type of every entity, in the order of ``entities``.")
            w.line("public static let entityTypes: [any ContractEntity.Type] = [")
            w.indent { w in
                for contract in set.entities { w.line("\(contract.swiftName).self,") }
            }
            w.line("]")
            w.line()
            w.line("/// The generated type of every event, in the order of ``events``.")
            w.line("public static let eventTypes: [any ContractEvent.Type] = [")
            w.indent { w in
                for contract in set.events { w.line("\(contract.swiftName).self,") }
            }
            w.line("]")
            for contract in set.contracts {
                w.line()
                renderDescriptor(contract, into: &w)
            }
        }
        return w.text
    }

    private func renderDescriptor(_ contract: Contract, into w: inout CodeWriter) {
        let name = DTOGenerator.descriptorName(contract)
        w.line("/// `\(contract.name)` version \(contract.version), from `\(contract.sourcePath)`.")
        if contract.kind == .entity {
            w.line("public static let \(name) = EntityDescriptor(")
            w.indent { w in
                w.line("name: \(SwiftLiteral.string(contract.name)),")
                w.line("swiftName: \(SwiftLiteral.string(contract.swiftName)),")
                w.line("summary: \(SwiftLiteral.string(contract.summary)),")
                w.line("table: \(SwiftLiteral.string(contract.table)),")
                w.line("scope: \(SwiftLiteral.string(contract.scope)),")
                w.line("direction: .\(contract.sync.direction.rawValue),")
                w.line("conflict: .\(Names.camelCase(contract.sync.conflict.rawValue)),")
                w.line("tombstones: \(contract.sync.tombstones),")
                w.line("retentionSeconds: \(contract.sync.retentionSeconds.map(String.init) ?? "nil"),")
                w.line("priority: .\(contract.sync.priority.rawValue),")
                // Written only when the contract sets them (the descriptor defaults to nil).
                if let rows = contract.sync.maxRows { w.line("maxRows: \(rows),") }
                if let bytes = contract.sync.maxRowBytes { w.line("maxRowBytes: \(bytes),") }
                // Only a written `max_bytes`: the descriptor applies the default from the fields.
                if let bytes = contract.maxBytes { w.line("maxBytes: \(bytes),") }
                if contract.isSigned { w.line("isSigned: true,") }
                w.line("currentVersion: \(contract.version),")
                w.line("oldestSupported: \(contract.oldestSupported),")
                w.line("primaryKey: \(SwiftLiteral.string(contract.primaryKey?.name ?? "id")),")
                w.line("versionField: \(contract.versionField.map { SwiftLiteral.string($0.name) } ?? "nil"),")
                renderFieldList("fields", contract.deviceFields, trailingComma: true, into: &w)
                renderFieldList("localFields", contract.localFields, trailingComma: true, into: &w)
                if contract.relations.isEmpty {
                    w.line("relations: [],")
                } else {
                    w.line("relations: [")
                    w.indent { w in
                        for relation in contract.relations {
                            w.line(
                                "RelationDescriptor(name: \(SwiftLiteral.string(relation.name)), kind: .\(relation.kind == .hasMany ? "hasMany" : "belongsTo"), target: \(SwiftLiteral.string(relation.target)), foreignKey: \(SwiftLiteral.string(relation.foreignKey))),"
                            )
                        }
                    }
                    w.line("],")
                }
                if contract.indexes.isEmpty {
                    w.line("indexes: [],")
                } else {
                    w.line("indexes: [")
                    w.indent { w in
                        for index in contract.indexes {
                            let indexName = TableSchema.indexName(table: contract.table, columns: index.fields, unique: index.isUnique)
                            w.line(
                                "IndexDescriptor(name: \(SwiftLiteral.string(indexName)), fields: [\(index.fields.map(SwiftLiteral.string).joined(separator: ", "))], isUnique: \(index.isUnique)),"
                            )
                        }
                    }
                    w.line("],")
                }
                let serverOnly = contract.serverOnlyFields
                renderKnownFields(contract, trailingComma: !serverOnly.isEmpty, into: &w)
                if !serverOnly.isEmpty {
                    renderFieldList("serverOnlyFields", serverOnly, trailingComma: false, into: &w)
                }
            }
            w.line(")")
        } else {
            w.line("public static let \(name) = EventDescriptor(")
            w.indent { w in
                w.line("name: \(SwiftLiteral.string(contract.name)),")
                w.line("swiftName: \(SwiftLiteral.string(contract.swiftName)),")
                w.line("summary: \(SwiftLiteral.string(contract.summary)),")
                w.line("table: \(SwiftLiteral.string(contract.table)),")
                w.line("scope: \(SwiftLiteral.string(contract.scope)),")
                w.line("direction: .\(contract.sync.direction.rawValue),")
                w.line("currentVersion: \(contract.version),")
                w.line("oldestSupported: \(contract.oldestSupported),")
                w.line("appliesTo: \(contract.appliesTo.map(SwiftLiteral.string) ?? "nil"),")
                if let bytes = contract.maxBytes { w.line("maxBytes: \(bytes),") }
                if contract.isSigned { w.line("isSigned: true,") }
                renderFieldList("fields", contract.fields, trailingComma: true, into: &w)
                renderKnownFields(contract, trailingComma: false, into: &w)
            }
            w.line(")")
        }
    }

    private func renderFieldList(_ label: String, _ fields: [Field], trailingComma: Bool, into w: inout CodeWriter) {
        let comma = trailingComma ? "," : ""
        if fields.isEmpty {
            w.line("\(label): []" + comma)
            return
        }
        w.line("\(label): [")
        w.indent { w in
            for field in fields {
                var arguments = ["name: \(SwiftLiteral.string(field.name))", "kind: \(kindExpression(field.type.type))"]
                if field.type.isOptional { arguments.append("isOptional: true") }
                if let value = mapping.wireDefaultExpression(field) { arguments.append("defaultValue: \(value)") }
                if field.since != 1 { arguments.append("since: \(field.since)") }
                if let rename = field.renamedFrom {
                    arguments.append("renamedFrom: \(SwiftLiteral.string(rename.name))")
                    arguments.append("renamedInVersion: \(rename.version)")
                }
                if let reason = field.deprecated { arguments.append("deprecation: \(SwiftLiteral.string(reason))") }
                if field.isEncrypted { arguments.append("isEncrypted: true") }
                if let maxLength = field.maxLength { arguments.append("maxLength: \(maxLength)") }
                if let maxBytes = field.maxBytes { arguments.append("maxBytes: \(maxBytes)") }
                if field.isPrimaryKey { arguments.append("isPrimaryKey: true") }
                if field.isVersionField { arguments.append("isVersionField: true") }
                if field.isLocal { arguments.append("isLocal: true") }
                if case .ref(let target) = field.type.type, let key = set.contract(named: target)?.primaryKey {
                    arguments.append("referencedKey: \(kindExpression(key.type.type))")
                }
                // Only files name content types: every other descriptor stays as it was generated.
                if field.type.type == .file {
                    arguments.append("contentTypes: [\(field.contentTypes.map(SwiftLiteral.string).joined(separator: ", "))]")
                }
                w.line("FieldDescriptor(\(arguments.joined(separator: ", "))),")
            }
        }
        w.line("]" + comma)
    }

    func kindExpression(_ type: FieldType) -> String {
        switch type {
        case .enumeration(let values, let fallback):
            return
                ".enumeration(values: [\(values.map(SwiftLiteral.string).joined(separator: ", "))], fallback: \(fallback.map(SwiftLiteral.string) ?? "nil"))"
        case .list(let element): return ".list(\(kindExpression(element)))"
        case .ref(let target): return ".ref(\(SwiftLiteral.string(target)))"
        default: return "." + type.spelling
        }
    }
}

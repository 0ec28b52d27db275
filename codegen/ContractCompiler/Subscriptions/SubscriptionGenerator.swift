import ContractRuntime

/// Renders the subscriptions: their descriptors in the registry, a typed constructor for each
/// (`Subscriptions.incident(id:)`), and the server indexes their queries need.
struct SubscriptionGenerator {
    let set: ContractSet

    /// `public static let subscriptions: [SubscriptionDescriptor]` of the registry.
    func renderRegistryProperty(into w: inout CodeWriter, kinds: (FieldType) -> String) {
        w.line("/// The subscriptions of the manifest, in its order.")
        w.line("public static let subscriptions: [SubscriptionDescriptor] = [")
        w.indent { w in
            for subscription in set.manifest.subscriptions {
                let descriptor = ContractValidator.descriptor(of: subscription, in: set)
                w.line("SubscriptionDescriptor(")
                w.indent { w in
                    w.line("name: \(SwiftLiteral.string(descriptor.name)), summary: \(SwiftLiteral.string(descriptor.summary)),")
                    w.line("entity: \(SwiftLiteral.string(descriptor.entity)),")
                    let parameters = descriptor.parameters.map {
                        ".init(name: \(SwiftLiteral.string($0.name)), kind: \(kinds($0.kind)), maxCount: \($0.maxCount))"
                    }
                    w.line("parameters: [\(parameters.joined(separator: ", "))],")
                    let filter = descriptor.filter.map { condition -> String in
                        let operand: String
                        switch condition.operand {
                        case .parameter(let name): operand = ".parameter(\(SwiftLiteral.string(name)))"
                        case .token(let claim): operand = ".token(\(SwiftLiteral.string(claim)))"
                        case .values(let values):
                            operand =
                                ".values(["
                                + values.compactMap { value -> String? in
                                    if case .string(let text) = value { return ".string(\(SwiftLiteral.string(text)))" }
                                    return nil
                                }.joined(separator: ", ") + "])"
                        }
                        return ".init(field: \(SwiftLiteral.string(condition.field)), operand: \(operand))"
                    }
                    w.line("filter: [\(filter.joined(separator: ", "))],")
                    w.line("includes: \(includes(descriptor.includes)),")
                    w.line("defaultTTLSeconds: \(descriptor.defaultTTLSeconds), priority: .\(descriptor.priority.rawValue)")
                }
                w.line("),")
            }
        }
        w.line("]")
    }

    private func includes(_ list: [SubscriptionDescriptor.Include]) -> String {
        "["
            + list.map { include in
                ".init(relation: \(SwiftLiteral.string(include.relation)), kind: .\(include.kind == .hasMany ? "hasMany" : "belongsTo"), "
                    + "target: \(SwiftLiteral.string(include.target)), foreignKey: \(SwiftLiteral.string(include.foreignKey)), "
                    + "includes: \(includes(include.includes)))"
            }.joined(separator: ", ") + "]"
    }

    /// `Subscriptions.swift`: a typed constructor per subscription.
    func renderConstructors() -> String {
        var w = CodeWriter()
        // Without a subscription nothing here names the runtime (an unused import warns).
        if !set.manifest.subscriptions.isEmpty {
            w.line("public import ContractRuntime")
            w.line()
        }
        w.line("/// The subscriptions of the contracts, each with typed parameters: hand one to")
        w.line("/// `SyncEngine.subscribe(_:ttl:priority:)` to sync just the rows it selects.")
        w.block("public enum Subscriptions") { w in
            for (index, subscription) in set.manifest.subscriptions.enumerated() {
                if index > 0 { w.line() }
                for line in subscription.doc.split(separator: "\n", omittingEmptySubsequences: false) {
                    w.line("/// " + line.trimmingCharacters(in: .whitespaces))
                }
                w.line("///")
                w.line("/// Selects \(subscription.shape); kept \(Self.duration(subscription.ttlSeconds)) after unsubscribing by default.")
                var arguments = subscription.parameters.map { "\(Names.camelCase($0.name)): \(swiftType(of: $0, in: subscription))" }
                arguments.append("scope: String? = nil")
                let values = subscription.parameters.map { parameter -> String in
                    "\(SwiftLiteral.string(parameter.name)): \(jsonExpression(of: parameter, in: subscription))"
                }
                w.block("public static func \(Names.camelCase(subscription.name))(\(arguments.joined(separator: ", "))) -> SubscriptionRequest") {
                    w in
                    w.line(
                        "SubscriptionRequest(name: \(SwiftLiteral.string(subscription.name)), parameters: [\(values.isEmpty ? ":" : values.joined(separator: ", "))], scope: scope)"
                    )
                }
            }
        }
        return w.text
    }

    /// The Swift type of a parameter, as the DTOs type its field: `String` for `id`, `ref<T>`
    /// and `string` fields, the field's generated enum (`Incident.State`) for an enum field,
    /// an array of either for a list.
    func swiftType(of parameter: Subscription.Parameter, in subscription: Subscription) -> String {
        let element = enumTypeName(of: parameter, in: subscription) ?? "String"
        if case .list = parameter.type { return "[\(element)]" }
        return element
    }

    /// The `JSONValue` a constructor sends for a parameter: the text of each value.
    private func jsonExpression(of parameter: Subscription.Parameter, in subscription: Subscription) -> String {
        let name = Names.camelCase(parameter.name)
        let isEnum = enumTypeName(of: parameter, in: subscription) != nil
        if case .list = parameter.type {
            return isEnum ? ".array(\(name).map { .string($0.rawValue) })" : ".array(\(name).map(JSONValue.string))"
        }
        return isEnum ? ".string(\(name).rawValue)" : ".string(\(name))"
    }

    /// `Entity.EnumType` when the parameter feeds an enum field of the root entity.
    private func enumTypeName(of parameter: Subscription.Parameter, in subscription: Subscription) -> String? {
        guard let root = set.contract(named: subscription.entity),
            let field = ContractValidator.field(fedBy: parameter.name, in: subscription, set: set),
            case .enumeration = field.type.type
        else { return nil }
        return root.swiftName + "." + TypeMapping(set: set).enumTypeName(field)
    }

    static func duration(_ seconds: Int) -> String {
        if seconds % 86_400 == 0 { return "\(seconds / 86_400) d" }
        if seconds % 3_600 == 0 { return "\(seconds / 3_600) h" }
        return "\(seconds / 60) min"
    }

    // MARK: Indexes

    /// An index a subscription's queries need on the server: `(_tenant_id, column)`.
    struct DerivedIndex: Hashable {
        var table: String
        var contract: String
        var column: String
        /// `<table>_<column>_subscription_idx`, within PostgreSQL's 63 characters; never the
        /// name of a declared index (`<table>_<column>_idx`), which may come later.
        var name: String { TableSchema.indexName(table: table, columns: [column, "subscription"], unique: false) }
    }

    /// The indexes the subscriptions need that no index of the server's table starts with: the
    /// root's filter fields (none when a condition is on the primary key, which the table's
    /// key indexes), the foreign keys of `has_many` includes (`belongs_to` reaches the target's
    /// primary key). A declared index counts when its first field is the column and the server
    /// has all its fields (not when it names a local field).
    func derivedIndexes() -> [DerivedIndex] {
        var needed: [DerivedIndex] = []
        func need(_ contract: Contract, _ column: String) {
            let local = Set(contract.localFields.map(\.name))
            guard contract.primaryKey?.name != column,
                !contract.indexes.contains(where: { $0.fields.first == column && local.isDisjoint(with: $0.fields) })
            else { return }
            let index = DerivedIndex(table: contract.table, contract: contract.name, column: column)
            if !needed.contains(index) { needed.append(index) }
        }
        for subscription in set.manifest.subscriptions {
            guard let root = set.contract(named: subscription.entity) else { continue }
            let key = root.primaryKey?.name
            if !subscription.conditions.contains(where: { $0.field == key }) {
                for condition in subscription.conditions { need(root, condition.field) }
            }
            func walk(_ includes: [Subscription.Include], of entity: Contract) {
                for include in includes {
                    guard let relation = entity.relations.first(where: { $0.name == include.relation }),
                        let target = set.contract(named: relation.target)
                    else { continue }
                    if relation.kind == .hasMany { need(target, relation.foreignKey) }
                    walk(include.includes, of: target)
                }
            }
            walk(subscription.includes, of: root)
        }
        return needed
    }

    /// A server migration per derived index of `contract`, after the contract's own steps:
    /// `incidents.v1.assignee_id_subscription_index`. It is named after `since`, the version
    /// whose step last created the table (the first, or a later one that rebuilt it, which
    /// drops every index it does not declare), so adding a subscription adds a step and
    /// changes none, and a rebuild is followed by a new step that makes the index again.
    func indexMigrations(of contract: Contract, since: Int, side: StorageSide) -> [MigrationStep] {
        guard side.isServer else { return [] }
        return derivedIndexes().filter { $0.contract == contract.name }.map { index in
            MigrationStep(
                identifier: Self.indexStepIdentifier(table: index.table, since: since, column: index.column), contract: contract.name,
                version: since,
                statements: [
                    "CREATE INDEX IF NOT EXISTS \(TypeMapping.quoted(index.name)) ON \(TypeMapping.quoted(index.table)) ("
                        + [EngineNames.Column.tenantID.rawValue, index.column].map(TypeMapping.quoted).joined(separator: ", ") + ")"
                ])
        }
    }

    /// The suffix of every derived index step's identifier.
    static let indexStepSuffix = "_subscription_index"

    static func indexStepIdentifier(table: String, since: Int, column: String) -> String {
        "\(table).v\(since).\(column)\(indexStepSuffix)"
    }
}

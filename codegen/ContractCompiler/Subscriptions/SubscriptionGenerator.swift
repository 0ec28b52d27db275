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
        w.line("public import ContractRuntime")
        w.line()
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
                var arguments = subscription.parameters.map { parameter -> String in
                    let swiftType: String
                    if case .list = parameter.type { swiftType = "[String]" } else { swiftType = "String" }
                    return "\(Names.camelCase(parameter.name)): \(swiftType)"
                }
                arguments.append("scope: String? = nil")
                let values = subscription.parameters.map { parameter -> String in
                    let name = Names.camelCase(parameter.name)
                    if case .list = parameter.type { return "\(SwiftLiteral.string(parameter.name)): .array(\(name).map(JSONValue.string))" }
                    return "\(SwiftLiteral.string(parameter.name)): .string(\(name))"
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
        var name: String { "\(table)_\(column)_subscription_idx" }
    }

    /// The indexes the subscriptions need that no declared index starts with: the root's filter
    /// fields (none when a condition is on the primary key), the foreign keys of `has_many`
    /// includes. Primary keys are indexed already.
    func derivedIndexes() -> [DerivedIndex] {
        var needed: [DerivedIndex] = []
        func need(_ contract: Contract, _ column: String) {
            guard !contract.fields.contains(where: { $0.name == column && $0.isPrimaryKey }),
                !contract.indexes.contains(where: { $0.fields.first == column })
            else { return }
            let index = DerivedIndex(table: contract.table, contract: contract.name, column: column)
            if !needed.contains(index) { needed.append(index) }
        }
        for subscription in set.manifest.subscriptions {
            guard let root = set.contract(named: subscription.entity) else { continue }
            let key = root.fields.first(where: \.isPrimaryKey)?.name
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

    /// A server migration per derived index of `contract`, after its own steps, named by the
    /// contract's first version so the name never changes: `incidents.v1.assignee_id_subscription_index`.
    func indexMigrations(of contract: Contract, firstVersion: Int, side: StorageSide) -> [MigrationStep] {
        guard side != .client else { return [] }
        return derivedIndexes().filter { $0.contract == contract.name }.map { index in
            MigrationStep(
                identifier: "\(index.table).v\(firstVersion).\(index.column)_subscription_index", contract: contract.name,
                version: firstVersion,
                statements: [
                    "CREATE INDEX IF NOT EXISTS \"\(index.name)\" ON \"\(index.table)\" (\"_tenant_id\", \"\(index.column)\")"
                ])
        }
    }
}

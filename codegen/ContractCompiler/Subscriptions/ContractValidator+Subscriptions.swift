import ContractRuntime

extension ContractValidator {
    /// The rules of the manifest's subscriptions, against the contracts they name.
    mutating func checkSubscriptions() {
        for subscription in set.manifest.subscriptions { checkSubscription(subscription) }
    }

    /// Field types a filter may compare: those both server storages hold as text.
    static func isFilterable(_ type: FieldType) -> Bool {
        switch type {
        case .id, .string, .enumeration, .ref: return true
        default: return false
        }
    }

    private mutating func checkSubscription(_ subscription: Subscription) {
        let name = subscription.name
        guard let root = set.contract(named: subscription.entity), root.kind == .entity else {
            let guess = Names.closest(to: subscription.entity, among: set.entities.map(\.name))
            diagnostics.error(
                .subscriptionEntity, "subscription '\(name)' names '\(subscription.entity)', which is not an entity of the contracts",
                at: subscription.entityLocation, help: guess.map { "did you mean '\($0)'?" } ?? "name an entity of contracts/entities")
            return
        }
        checkSubscribable(root, in: subscription, at: subscription.entityLocation)
        if subscription.conditions.isEmpty {
            diagnostics.error(
                .subscriptionFilter, "subscription '\(name)' has no condition: it would select the whole scope '\(root.scope)'",
                at: subscription.whereLocation, help: "select rows by a field, for example `where: { id: \"{id}\" }`, or pull the scope")
        }
        var used: Set<String> = []
        for condition in subscription.conditions {
            guard let field = root.fields.first(where: { $0.name == condition.field }) else {
                let local = root.localFields.contains { $0.name == condition.field }
                let guess = Names.closest(to: condition.field, among: root.fields.map(\.name))
                diagnostics.error(
                    .subscriptionFilter,
                    local
                        ? "'\(condition.field)' is a local field of \(root.name): the server does not have it"
                        : "\(root.name) has no field '\(condition.field)'",
                    at: condition.location, help: guess.map { "did you mean '\($0)'?" } ?? "filter on a synced field of \(root.name)")
                continue
            }
            if !Self.isFilterable(field.type.type) || field.isEncrypted || field.isServerOnly {
                diagnostics.error(
                    .subscriptionFilter,
                    "subscription '\(name)' filters on '\(field.name)' (\(field.type.spelling)\(field.isEncrypted ? ", encrypted" : "")\(field.isServerOnly ? ", server only" : ""))",
                    at: condition.location, help: "filter on a synced, unencrypted `id`, `ref<T>`, `string` or `enum` field")
                continue
            }
            switch condition.operand {
            case .parameter(let parameterName):
                used.insert(parameterName)
                guard let parameter = subscription.parameters.first(where: { $0.name == parameterName }) else {
                    let known = subscription.parameters.map(\.name)
                    diagnostics.error(
                        .subscriptionParameter,
                        "the condition on '\(field.name)' names the parameter '\(parameterName)', which '\(name)' does not declare",
                        at: condition.location,
                        help: Names.closest(to: parameterName, among: known).map { "did you mean '{\($0)}'?" }
                            ?? "declare it under `parameters:`, for example `\(parameterName): \(field.type.type.spelling)`")
                    continue
                }
                checkParameter(parameter, against: field, condition: condition, in: subscription)
            case .token(let claim):
                if !Subscription.tokenClaims.contains(claim) {
                    diagnostics.error(
                        .subscriptionParameter, "'{token.\(claim)}' is not a claim of the token", at: condition.location,
                        help: "a condition may name {token.user_id} or {token.device_id}")
                }
            case .values(let values):
                if case .enumeration(let allowed, _) = field.type.type {
                    for value in values where !allowed.contains(value) {
                        diagnostics.error(
                            .subscriptionFilter, "'\(value)' is not a value of \(root.name).\(field.name)", at: condition.location,
                            help: "the values are \(allowed.joined(separator: ", "))")
                    }
                }
                if values.count > 1, !condition.isIn {
                    diagnostics.error(.subscriptionFilter, "several values need `in`", at: condition.location, help: "write `{ in: [...] }`")
                }
            }
        }
        for parameter in subscription.parameters where !used.contains(parameter.name) {
            diagnostics.error(
                .subscriptionParameter, "parameter '\(parameter.name)' of subscription '\(name)' is never used", at: parameter.location,
                help: "use it in `where` as \"{\(parameter.name)}\", or remove it")
        }
        checkIncludes(subscription.includes, of: root, depth: 1, in: subscription)
    }

    /// An entity rows may be taken of: travels down, keyed by an `id`.
    private mutating func checkSubscribable(_ entity: Contract, in subscription: Subscription, at location: SourceLocation) {
        if entity.sync.direction == .up {
            diagnostics.error(
                .subscriptionEntity, "subscription '\(subscription.name)' takes rows of \(entity.name), which devices never pull (direction: up)",
                at: location, help: "subscribe to an entity that travels down")
        }
        if let key = entity.fields.first(where: \.isPrimaryKey), key.type.type != .id {
            diagnostics.error(
                .subscriptionEntity,
                "subscription '\(subscription.name)' takes rows of \(entity.name), whose primary key is \(key.type.spelling), not `id`",
                at: location, help: "subscriptions select rows by keys stored as text; key the entity with `id`")
        }
    }

    private mutating func checkParameter(
        _ parameter: Subscription.Parameter, against field: Field, condition: Subscription.Condition, in subscription: Subscription
    ) {
        let element: FieldType
        if case .list(let inner) = parameter.type {
            element = inner
            if !condition.isIn {
                diagnostics.error(
                    .subscriptionParameter, "the list parameter '\(parameter.name)' needs `in`", at: condition.location,
                    help: "write `\(field.name): { in: \"{\(parameter.name)}\" }`")
            }
        } else {
            element = parameter.type
            if condition.isIn {
                diagnostics.error(
                    .subscriptionParameter, "`in` needs a list parameter; '\(parameter.name)' is \(parameter.type.spelling)", at: condition.location,
                    help: "declare it as `list<\(parameter.type.spelling)>`, or write `\(field.name): \"{\(parameter.name)}\"`")
            }
        }
        let fits: Bool
        switch (element, field.type.type) {
        case (.id, .id), (.id, .ref), (.string, .string), (.string, .enumeration), (.enumeration, .enumeration): fits = true
        default: fits = element == field.type.type
        }
        if !fits {
            diagnostics.error(
                .subscriptionParameter,
                "parameter '\(parameter.name)' is \(element.spelling) but '\(field.name)' is \(field.type.spelling)", at: parameter.location,
                help: "declare it as `\(field.type.type.spelling)`")
        }
    }

    private mutating func checkIncludes(_ includes: [Subscription.Include], of entity: Contract, depth: Int, in subscription: Subscription) {
        for include in includes {
            guard depth <= SubscriptionDescriptor.maximumIncludeDepth else {
                diagnostics.error(
                    .subscriptionInclude,
                    "subscription '\(subscription.name)' includes deeper than \(SubscriptionDescriptor.maximumIncludeDepth) levels",
                    at: include.location, help: "subscribe to the deeper rows with a subscription of their own")
                return
            }
            guard let relation = entity.relations.first(where: { $0.name == include.relation }) else {
                let guess = Names.closest(to: include.relation, among: entity.relations.map(\.name))
                diagnostics.error(
                    .subscriptionInclude, "\(entity.name) has no relation '\(include.relation)'", at: include.location,
                    help: guess.map { "did you mean '\($0)'?" } ?? "declare it under `relations:` of \(entity.name)")
                continue
            }
            guard let target = set.contract(named: relation.target), target.kind == .entity else { continue }
            if target.scope != entity.scope {
                diagnostics.error(
                    .subscriptionInclude,
                    "'\(include.relation)' reaches \(target.name) in the scope '\(target.scope)', not '\(entity.scope)' like \(entity.name)",
                    at: include.location, help: "a subscription reads one scope; subscribe to \(target.name) separately")
            }
            checkSubscribable(target, in: subscription, at: include.location)
            checkIncludes(include.includes, of: target, depth: depth + 1, in: subscription)
        }
    }

    /// The runtime descriptor of a valid subscription.
    static func descriptor(of subscription: Subscription, in set: ContractSet) -> SubscriptionDescriptor {
        func includes(_ list: [Subscription.Include], of entity: String) -> [SubscriptionDescriptor.Include] {
            list.compactMap { include in
                guard let relation = set.contract(named: entity)?.relations.first(where: { $0.name == include.relation }) else { return nil }
                return SubscriptionDescriptor.Include(
                    relation: relation.name, kind: relation.kind, target: relation.target, foreignKey: relation.foreignKey,
                    includes: includes(include.includes, of: relation.target))
            }
        }
        return SubscriptionDescriptor(
            name: subscription.name, summary: subscription.doc, entity: subscription.entity,
            parameters: subscription.parameters.map { .init(name: $0.name, kind: $0.type, maxCount: $0.maxCount) },
            filter: subscription.conditions.map { condition in
                switch condition.operand {
                case .parameter(let name): .init(field: condition.field, operand: .parameter(name))
                case .token(let claim): .init(field: condition.field, operand: .token(claim))
                case .values(let values): .init(field: condition.field, operand: .values(values.map(JSONValue.string)))
                }
            },
            includes: includes(subscription.includes, of: subscription.entity), defaultTTLSeconds: subscription.ttlSeconds,
            priority: subscription.priority)
    }
}

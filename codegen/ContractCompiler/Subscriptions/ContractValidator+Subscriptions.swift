import ContractRuntime

extension ContractValidator {
    /// The rules of the manifest's subscriptions, against the contracts they name.
    mutating func checkSubscriptions() {
        checkSubscriptionNames()
        for subscription in set.manifest.subscriptions { checkSubscription(subscription) }
    }

    /// Whether both server storages hold values of `type` as text, as a filter compares them
    /// (the server binds every parameter and claim as text): `id`, `string`, `enum`, and a
    /// `ref<T>` to an entity keyed by `id` or `string`. PostgreSQL holds `uuid` as UUID, `date`
    /// as DATE, numbers and flags as numbers, lists and `json` as JSONB.
    static func isStoredAsText(_ type: FieldType, in set: ContractSet) -> Bool {
        switch type {
        case .id, .string, .enumeration: return true
        case .ref(let target):
            guard let key = set.contract(named: target)?.primaryKey?.type.type else { return false }
            return key == .id || key == .string
        default: return false
        }
    }

    /// The field a parameter feeds: that of the first condition naming it.
    static func field(fedBy parameter: String, in subscription: Subscription, set: ContractSet) -> Field? {
        guard let root = set.contract(named: subscription.entity),
            let condition = subscription.conditions.first(where: { $0.operand == .parameter(parameter) })
        else { return nil }
        return root.fields.first { $0.name == condition.field }
    }

    /// The names that become Swift: each subscription's constructor (`Subscriptions.<name>`)
    /// and its parameters' labels, beside the constructor's own `scope:`.
    private mutating func checkSubscriptionNames() {
        var constructors: [String: Subscription] = [:]
        for subscription in set.manifest.subscriptions {
            let function = Names.camelCase(subscription.name)
            if Names.swiftKeywords.contains(function) {
                diagnostics.error(
                    .reservedWord, "subscription name '\(subscription.name)' is a Swift keyword", at: subscription.location,
                    help: "choose a more specific name, for example '\(subscription.name)_rows'")
            } else if let first = constructors[function], first.name != subscription.name {  // the same name twice is DUPLICATE_KEY
                diagnostics.error(
                    .generatedNameClash,
                    "subscriptions '\(first.name)' and '\(subscription.name)' generate the same constructor `Subscriptions.\(function)`",
                    at: subscription.location, help: "rename one of them",
                    notes: [.init("'\(first.name)' declared here", at: first.location)])
            } else if constructors[function] == nil {
                constructors[function] = subscription
            }
            // The constructor's last parameter is `scope:`, the scope key to read in.
            var labels: [String: String] = ["scope": "scope"]
            for parameter in subscription.parameters {
                let label = Names.camelCase(parameter.name)
                if Names.swiftKeywords.contains(label) {
                    diagnostics.error(
                        .reservedWord, "parameter name '\(parameter.name)' is a Swift keyword", at: parameter.location,
                        help: "choose a more specific name, for example '\(parameter.name)_value'")
                } else if let other = labels[label] {
                    diagnostics.error(
                        .generatedNameClash,
                        other == "scope" && parameter.name == "scope"
                            ? "parameter 'scope' of subscription '\(subscription.name)' would clash with the constructor's own `scope:` (the scope key to read in)"
                            : "parameters '\(other)' and '\(parameter.name)' of subscription '\(subscription.name)' generate the same label `\(label)`",
                        at: parameter.location, help: "rename the parameter")
                } else {
                    labels[label] = parameter.name
                }
            }
        }
    }

    private mutating func checkSubscription(_ subscription: Subscription) {
        let name = subscription.name
        guard let root = set.contract(named: subscription.entity), root.kind == .entity else {
            let isEvent = set.contract(named: subscription.entity)?.kind == .event
            let guess = Names.closest(to: subscription.entity, among: set.entities.map(\.name))
            diagnostics.error(
                .subscriptionEntity,
                isEvent
                    ? "subscription '\(name)' names the event '\(subscription.entity)': events travel up and are never pulled"
                    : "subscription '\(name)' names '\(subscription.entity)', which is not an entity of the contracts",
                at: subscription.entityLocation,
                help: isEvent ? "subscribe to an entity" : guess.map { "did you mean '\($0)'?" } ?? "name an entity of contracts/entities")
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
            if case .parameter(let parameterName) = condition.operand { used.insert(parameterName) }
            guard let field = root.fields.first(where: { $0.name == condition.field }) else {
                let local = root.localFields.contains { $0.name == condition.field }
                let guess = Names.closest(to: condition.field, among: root.fields.map(\.name))
                diagnostics.error(
                    .subscriptionFilter,
                    local
                        ? "'\(condition.field)' is a local field of \(root.name): the server does not have it"
                        : "\(root.name) has no field '\(condition.field)'",
                    at: condition.location,
                    help: local
                        ? "filter on a synced field of \(root.name)"
                        : guess.map { "did you mean '\($0)'?" } ?? "filter on a synced field of \(root.name)")
                continue
            }
            guard checkFilterable(field, of: root, condition: condition, in: subscription) else { continue }
            switch condition.operand {
            case .parameter(let parameterName):
                guard let parameter = subscription.parameters.first(where: { $0.name == parameterName }) else {
                    if subscription.refusedParameters.contains(parameterName) { continue }
                    let known = subscription.parameters.map(\.name)
                    diagnostics.error(
                        .subscriptionParameter,
                        "the condition on '\(field.name)' names the parameter '\(parameterName)', which '\(name)' does not declare",
                        at: condition.valueLocation,
                        help: Names.closest(to: parameterName, among: known).map { "did you mean '{\($0)}'?" }
                            ?? "declare it under `parameters:`, for example `\(parameterName): \(field.type.type.spelling)`")
                    continue
                }
                checkParameter(parameter, against: field, condition: condition, in: subscription)
            case .token(let claim):
                if !Subscription.tokenClaims.contains(claim) {
                    diagnostics.error(
                        .subscriptionParameter, "'{token.\(claim)}' is not a claim of the token", at: condition.valueLocation,
                        help: "a condition may name {token.user_id} or {token.device_id}")
                }
            case .values(let values):
                if case .enumeration(let allowed, _) = field.type.type {
                    for value in values where !allowed.contains(value) {
                        diagnostics.error(
                            .subscriptionFilter, "'\(value)' is not a value of \(root.name).\(field.name)", at: condition.valueLocation,
                            help: "the values are \(allowed.joined(separator: ", "))")
                    }
                }
                if values.count > 1, !condition.isIn {
                    diagnostics.error(
                        .subscriptionFilter, "several values need `in`", at: condition.valueLocation,
                        help: "write `\(field.name): { in: [\(values.joined(separator: ", "))] }`")
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

    /// A field the server can select rows by from an index: synced to devices, not encrypted,
    /// and stored as text on both server storages.
    private mutating func checkFilterable(
        _ field: Field, of root: Contract, condition: Subscription.Condition, in subscription: Subscription
    ) -> Bool {
        let problem: String?
        if field.type.type == .file {
            problem = "'\(field.name)' is a file: rows hold a reference to it, not a value a filter compares"
        } else if field.isEncrypted {
            problem = "'\(field.name)' is encrypted: the server holds only sealed bytes and cannot compare them"
        } else if field.isServerOnly {
            problem = "'\(field.name)' is server-only: devices never hold it, so they cannot tell which of their rows it selects"
        } else if !Self.isStoredAsText(field.type.type, in: set) {
            let postgres = TypeMapping(set: set).sqlType(field.type.type, dialect: .postgres)
            problem = "'\(field.name)' is \(field.type.type.spelling), which PostgreSQL stores as \(postgres), not as text"
        } else {
            problem = nil
        }
        guard let problem else { return true }
        diagnostics.error(
            .subscriptionFilter, "subscription '\(subscription.name)' cannot filter on \(root.name).\(field.name): \(problem)",
            at: condition.location,
            help: "filter on a synced, unencrypted `id`, `string` or `enum` field, or a `ref<T>` to an entity keyed by `id` or `string`")
        return false
    }

    /// An entity rows may be taken of: travels down, keyed by an `id`.
    private mutating func checkSubscribable(_ entity: Contract, in subscription: Subscription, at location: SourceLocation) {
        if entity.sync.direction == .up {
            diagnostics.error(
                .subscriptionEntity, "subscription '\(subscription.name)' takes rows of \(entity.name), which devices never pull (direction: up)",
                at: location, help: "subscribe to an entity that travels down (`direction: down` or `both`)")
        }
        if let key = entity.primaryKey, key.type.type != .id {
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
                    .subscriptionParameter, "the list parameter '\(parameter.name)' needs `in`", at: condition.valueLocation,
                    help: "write `\(field.name): { in: \"{\(parameter.name)}\" }`")
            }
        } else {
            element = parameter.type
            if condition.isIn {
                diagnostics.error(
                    .subscriptionParameter, "`in` needs a list parameter; '\(parameter.name)' is \(parameter.type.spelling)",
                    at: condition.valueLocation,
                    help: "declare it as `list<\(parameter.type.spelling)>`, or write `\(field.name): \"{\(parameter.name)}\"`")
            }
        }
        let fits: Bool
        switch (element, field.type.type) {
        case (.id, .id), (.id, .ref), (.string, .string), (.string, .enumeration), (.enumeration, .enumeration): fits = true
        default: fits = element == field.type.type
        }
        if !fits {
            let expected: String
            switch field.type.type {
            case .ref: expected = "id"
            case .enumeration: expected = "string"
            default: expected = field.type.type.spelling
            }
            diagnostics.error(
                .subscriptionParameter,
                "parameter '\(parameter.name)' is \(element.spelling) but \(subscription.entity).\(field.name) is \(field.type.spelling)",
                at: parameter.location, help: "declare it as `\(condition.isIn ? "list<\(expected)>" : expected)`")
        }
    }

    private mutating func checkIncludes(_ includes: [Subscription.Include], of entity: Contract, depth: Int, in subscription: Subscription) {
        var seen: Set<String> = []
        for include in includes {
            guard depth <= SubscriptionDescriptor.maximumIncludeDepth else {
                diagnostics.error(
                    .subscriptionInclude,
                    "subscription '\(subscription.name)' includes deeper than \(SubscriptionDescriptor.maximumIncludeDepth) levels",
                    at: include.location, help: "subscribe to the deeper rows with a subscription of their own")
                return
            }
            guard seen.insert(include.relation).inserted else {
                diagnostics.error(
                    .subscriptionInclude, "'\(include.relation)' is included twice under \(entity.name)", at: include.location,
                    help: "include it once")
                continue
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

    /// The runtime descriptor of a valid subscription. A parameter that feeds an enum field
    /// takes that field's kind, so the engines check its values against the enum's.
    static func descriptor(of subscription: Subscription, in set: ContractSet) -> SubscriptionDescriptor {
        func includes(_ list: [Subscription.Include], of entity: String) -> [SubscriptionDescriptor.Include] {
            list.compactMap { include in
                guard let relation = set.contract(named: entity)?.relations.first(where: { $0.name == include.relation }) else { return nil }
                return SubscriptionDescriptor.Include(
                    relation: relation.name, kind: relation.kind, target: relation.target, foreignKey: relation.foreignKey,
                    includes: includes(include.includes, of: relation.target))
            }
        }
        func kind(of parameter: Subscription.Parameter) -> FieldKind {
            guard let field = Self.field(fedBy: parameter.name, in: subscription, set: set), case .enumeration = field.type.type else {
                return parameter.type
            }
            if case .list = parameter.type { return .list(field.type.type) }
            return field.type.type
        }
        return SubscriptionDescriptor(
            name: subscription.name, summary: subscription.doc, entity: subscription.entity,
            parameters: subscription.parameters.map { .init(name: $0.name, kind: kind(of: $0), maxCount: $0.maxCount) },
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

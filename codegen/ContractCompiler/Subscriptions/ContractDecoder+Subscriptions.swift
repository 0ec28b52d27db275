import ContractRuntime

extension ContractDecoder {
    /// The manifest's `subscriptions:` mapping. What needs the contracts (fields, relations,
    /// types) is the validator's (``ContractValidator/checkSubscriptions()``).
    mutating func decodeSubscriptions(_ node: YAMLNode) -> [Subscription] {
        if node.isNull { return [] }
        guard let reader = MappingReader(node, context: "subscriptions", diagnostics: &diagnostics) else { return [] }
        var subscriptions: [Subscription] = []
        for entry in reader.entries {
            guard let name = entry.key.scalar else { continue }
            if !Names.isSnakeCase(name) {
                diagnostics.error(
                    .invalidIdentifier, "subscription name '\(name)' is not lower snake case", at: entry.key.location,
                    help: "rename it to '\(Names.suggestedSnakeCase(name))'")
            }
            if let subscription = decodeSubscription(name, entry.value, at: entry.key.location) { subscriptions.append(subscription) }
        }
        return subscriptions
    }

    private mutating func decodeSubscription(_ name: String, _ node: YAMLNode, at location: SourceLocation) -> Subscription? {
        let context = "subscription '\(name)'"
        guard let reader = MappingReader(node, context: context, diagnostics: &diagnostics) else { return nil }
        reader.rejectUnknownKeys(known: ContractGrammar.subscription.keyNames, diagnostics: &diagnostics)
        let entityNode = reader.require(
            "entity", help: "name the entity whose rows it selects, for example `entity: Incident`", diagnostics: &diagnostics)
        let entity = entityNode.flatMap { ScalarReader.string($0, "the subscription's entity", diagnostics: &diagnostics) }
        let doc = reader.require("doc", help: "say in one sentence what a device subscribes to it for", diagnostics: &diagnostics)
            .flatMap { ScalarReader.string($0, "doc", diagnostics: &diagnostics) }
        var parameters: [Subscription.Parameter] = []
        var refusedParameters: Set<String> = []
        if let node = reader.value("parameters"), !node.isNull,
            let parametersReader = MappingReader(node, context: "parameters of \(context)", diagnostics: &diagnostics)
        {
            for entry in parametersReader.entries {
                guard let parameterName = entry.key.scalar else { continue }
                if !Names.isSnakeCase(parameterName) {
                    diagnostics.error(
                        .invalidIdentifier, "parameter name '\(parameterName)' is not lower snake case", at: entry.key.location,
                        help: "rename it to '\(Names.suggestedSnakeCase(parameterName))'")
                }
                if let parameter = decodeParameter(parameterName, entry.value, at: entry.key.location) {
                    parameters.append(parameter)
                } else {
                    refusedParameters.insert(parameterName)
                }
            }
        }
        var conditions: [Subscription.Condition] = []
        let whereNode = reader.require(
            "where", help: "select rows by a field, for example `where: { id: \"{id}\" }`", diagnostics: &diagnostics)
        if let whereNode, let whereReader = MappingReader(whereNode, context: "`where` of \(context)", diagnostics: &diagnostics) {
            for entry in whereReader.entries {
                guard let field = entry.key.scalar else { continue }
                if let condition = decodeCondition(field, entry.value, at: entry.key.location) { conditions.append(condition) }
            }
        }
        let includes = reader.value("include").map { decodeIncludes($0) } ?? []
        var ttl = 0
        if let node = reader.require("ttl", help: "say how long rows stay after unsubscribing, for example `ttl: 7d`", diagnostics: &diagnostics) {
            ttl = decodeTTL(node) ?? 0
        }
        let priority =
            reader.value("priority").flatMap { ScalarReader.oneOf($0, "the subscription's priority", SyncPriority.self, diagnostics: &diagnostics) }
            ?? .normal
        guard let entity, let entityNode else { return nil }
        return Subscription(
            name: name, doc: (doc ?? "").trimmingCharacters(in: .whitespacesAndNewlines), entity: entity, entityLocation: entityNode.location,
            parameters: parameters, refusedParameters: refusedParameters, conditions: conditions, whereLocation: whereNode?.location ?? location,
            includes: includes, ttlSeconds: ttl, priority: priority, location: location)
    }

    private mutating func decodeParameter(_ name: String, _ node: YAMLNode, at location: SourceLocation) -> Subscription.Parameter? {
        var spelling: String?
        var maxCount: Int?
        if node.mapping != nil, let reader = MappingReader(node, context: "parameter '\(name)'", diagnostics: &diagnostics) {
            reader.rejectUnknownKeys(known: ["type", "max_count"], diagnostics: &diagnostics)
            spelling = reader.require("type", help: "write its type, for example `type: list<id>`", diagnostics: &diagnostics)
                .flatMap { ScalarReader.string($0, "the parameter's type", diagnostics: &diagnostics) }
            maxCount = reader.value("max_count").flatMap {
                ScalarReader.int($0, "max_count", range: 1...Subscription.maximumListCount, diagnostics: &diagnostics)
            }
        } else {
            spelling = ScalarReader.string(node, "the parameter's type", diagnostics: &diagnostics)
        }
        guard let spelling else { return nil }
        switch TypeParser.parse(spelling) {
        case .success(let reference):
            if reference.isOptional {
                diagnostics.error(
                    .invalidValue, "parameter '\(name)' cannot be optional", at: node.location,
                    help: "a subscriber always gives every parameter; write `\(reference.type.spelling)`")
                return nil
            }
            let isList: Bool
            if case .list = reference.type { isList = true } else { isList = false }
            if maxCount != nil, !isList {
                diagnostics.error(
                    .invalidValue, "`max_count` applies to list parameters only", at: node.location, help: "remove it, or make the type a list")
            }
            return Subscription.Parameter(name: name, type: reference.type, maxCount: isList ? (maxCount ?? 100) : 1, location: location)
        case .failure:
            diagnostics.error(
                .unknownType, "parameter '\(name)' has the unknown type '\(spelling)'", at: node.location,
                help: "write the type of the field it feeds: `id`, `string` or `enum`, or `list<T>` of one of them for `in`")
            return nil
        }
    }

    private mutating func decodeCondition(_ field: String, _ node: YAMLNode, at location: SourceLocation) -> Subscription.Condition? {
        func operand(_ node: YAMLNode) -> Subscription.Operand? {
            if let items = node.sequence {
                var values: [String] = []
                for item in items {
                    guard let text = ScalarReader.string(item, "a value of `in`", diagnostics: &diagnostics) else { return nil }
                    values.append(text)
                }
                guard !values.isEmpty else {
                    diagnostics.error(
                        .invalidValue, "`in` needs at least one value", at: node.location, help: "list the values, for example `in: [new, open]`")
                    return nil
                }
                return .values(values)
            }
            guard let text = ScalarReader.string(node, "the condition on '\(field)'", diagnostics: &diagnostics) else { return nil }
            if text.hasPrefix("{"), text.hasSuffix("}") {
                let inner = text.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if inner.hasPrefix("token.") { return .token(String(inner.dropFirst("token.".count))) }
                return .parameter(inner)
            }
            return .values([text])
        }
        if node.mapping != nil {
            guard let reader = MappingReader(node, context: "condition on '\(field)'", diagnostics: &diagnostics) else { return nil }
            reader.rejectUnknownKeys(known: ["in"], diagnostics: &diagnostics)
            guard let inNode = reader.require("in", help: "write `{ in: \"{list_parameter}\" }` or `{ in: [a, b] }`", diagnostics: &diagnostics),
                let value = operand(inNode)
            else { return nil }
            return Subscription.Condition(field: field, operand: value, isIn: true, location: location, valueLocation: inNode.location)
        }
        guard let value = operand(node) else { return nil }
        return Subscription.Condition(field: field, operand: value, isIn: false, location: location, valueLocation: node.location)
    }

    private mutating func decodeIncludes(_ node: YAMLNode) -> [Subscription.Include] {
        if node.isNull { return [] }
        if let items = node.sequence {
            return items.compactMap { item in
                ScalarReader.string(item, "an included relation", diagnostics: &diagnostics).map {
                    Subscription.Include(relation: $0, includes: [], location: item.location)
                }
            }
        }
        if let scalar = node.scalar {
            return [Subscription.Include(relation: scalar, includes: [], location: node.location)]
        }
        guard let reader = MappingReader(node, context: "include", diagnostics: &diagnostics) else { return [] }
        return reader.entries.compactMap { entry in
            guard let relation = entry.key.scalar else { return nil }
            return Subscription.Include(relation: relation, includes: decodeIncludes(entry.value), location: entry.key.location)
        }
    }

    /// `7d`, `12h`, `90m`, `2w`: more than nothing, at most a year.
    private mutating func decodeTTL(_ node: YAMLNode) -> Int? {
        let help = "write a duration such as `7d`, `12h` or `2w`, at most `365d`"
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        guard let text = node.scalar, let unit = text.last, let seconds = units[unit], let amount = Int(text.dropLast()), amount > 0,
            amount <= Subscription.maximumTTLSeconds / seconds
        else {
            diagnostics.error(
                .invalidValue, "ttl '\(node.scalar ?? node.kindDescription)' is not a duration of at most a year", at: node.location, help: help)
            return nil
        }
        return amount * seconds
    }
}

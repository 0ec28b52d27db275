package import ContractRuntime

/// The order a device downloads in, from the contracts' `priority` (docs/contracts.md):
/// scopes holding higher priority contracts first, and within a scope pulled for the first
/// time, one tier of equal priority at a time (`critical`, `high`, `normal`, `low`). Events,
/// which have no priority, count as `normal`.
package struct PullPriorities: Sendable {
    let contracts: ContractCatalog

    package init(_ contracts: ContractCatalog) {
        self.contracts = contracts
    }

    /// `scopes` ordered by the highest priority each delivers; equal ones keep their order.
    package func order(_ scopes: [String]) -> [String] {
        scopes.enumerated()
            .map { (scope: $0.element, offset: $0.offset, top: topPriority(of: $0.element)) }
            .sorted { ($0.top, $0.offset) < ($1.top, $1.offset) }
            .map(\.scope)
    }

    /// The contracts a scope delivers to devices, grouped by priority, highest first (names
    /// sorted within a tier). Empty for a scope these contracts do not declare.
    package func tiers(of scope: String) -> [[String]] {
        guard let name = scopeName(scope) else { return [] }
        var byPriority: [SyncPriority: [String]] = [:]
        for entity in contracts.entities where entity.scope == name && entity.direction != .up {
            byPriority[entity.priority, default: []].append(entity.name)
        }
        for event in contracts.events where event.scope == name && event.direction != .up {
            byPriority[.normal, default: []].append(event.name)
        }
        return byPriority.keys.sorted().map { byPriority[$0]!.sorted() }
    }

    /// The contract scope a configured scope names: a scope name (`team`) or a key its
    /// template makes (`ops:team:t-1`).
    package func scopeName(_ scope: String) -> String? {
        if contracts.scope(named: scope) != nil { return scope }
        for descriptor in contracts.scopes {
            let template = descriptor.keyTemplate
            guard let open = template.firstIndex(of: "{") else {
                if template == scope { return descriptor.name }
                continue
            }
            if scope.hasPrefix(template[..<open]) { return descriptor.name }
        }
        return nil
    }

    /// The highest priority among the contracts a scope delivers (`low` when none).
    package func topPriority(of scope: String) -> SyncPriority {
        guard let name = scopeName(scope) else { return .low }
        let entities = contracts.entities.filter { $0.scope == name && $0.direction != .up }.map(\.priority)
        let events = contracts.events.contains { $0.scope == name && $0.direction != .up } ? [SyncPriority.normal] : []
        return (entities + events).min() ?? .low
    }
}

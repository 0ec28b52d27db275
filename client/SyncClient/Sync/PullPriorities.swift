import ContractRuntime
import Contracts

/// The order a device downloads in, from the contracts' `priority` (docs/contracts.md):
/// scopes holding higher priority contracts first, and within a scope pulled for the first
/// time, one tier of equal priority at a time (`critical`, `high`, `normal`, `low`). Events,
/// which have no priority, count as `normal`.
package enum PullPriorities {
    /// `scopes` ordered by the highest priority each delivers; equal ones keep their order.
    package static func order(_ scopes: [String]) -> [String] {
        scopes.enumerated()
            .sorted { ($0.element.topPriority, $0.offset) < ($1.element.topPriority, $1.offset) }
            .map(\.element)
    }

    /// The contracts a scope delivers to devices, grouped by priority, highest first (names
    /// sorted within a tier). Empty for a scope this build does not know.
    package static func tiers(of scope: String) -> [[String]] {
        guard let name = scopeName(scope) else { return [] }
        var byPriority: [SyncPriority: [String]] = [:]
        for entity in ContractRegistry.entities where entity.scope == name && entity.direction != .up {
            byPriority[entity.priority, default: []].append(entity.name)
        }
        for event in ContractRegistry.events where event.scope == name && event.direction != .up {
            byPriority[.normal, default: []].append(event.name)
        }
        return byPriority.keys.sorted().map { byPriority[$0]!.sorted() }
    }

    /// The contract scope a configured scope names: a scope name (`team`) or a key its
    /// template makes (`ops:team:t-1`).
    package static func scopeName(_ scope: String) -> String? {
        if ContractRegistry.scopes.contains(where: { $0.name == scope }) { return scope }
        for descriptor in ContractRegistry.scopes {
            let template = descriptor.keyTemplate
            guard let open = template.firstIndex(of: "{") else {
                if template == scope { return descriptor.name }
                continue
            }
            if scope.hasPrefix(template[..<open]) { return descriptor.name }
        }
        return nil
    }
}

extension String {
    /// The highest priority among the contracts this scope delivers (`low` when none).
    fileprivate var topPriority: SyncPriority {
        guard let name = PullPriorities.scopeName(self) else { return .low }
        let entities = ContractRegistry.entities.filter { $0.scope == name && $0.direction != .up }.map(\.priority)
        let events = ContractRegistry.events.contains { $0.scope == name && $0.direction != .up } ? [SyncPriority.normal] : []
        return (entities + events).min() ?? .low
    }
}

import ContractRuntime
import Contracts

/// Finds a contract by the name a person types: `Incident`, `incident`, `incidents` (the
/// table), `service-asset`, `task_started`; for a name it does not know, says the closest.
enum ContractLookup {
    static func entity(named name: String) throws(DeviceFailure) -> (descriptor: EntityDescriptor, type: any ContractEntity.Type) {
        let candidates = zip(ContractRegistry.entities, ContractRegistry.entityTypes).map { descriptor, type in
            (names: [descriptor.name, descriptor.swiftName, descriptor.table], value: (descriptor, type))
        }
        return try find(name, in: candidates, kind: "entity", plural: "entities")
    }

    static func event(named name: String) throws(DeviceFailure) -> (descriptor: EventDescriptor, type: any ContractEvent.Type) {
        let candidates = zip(ContractRegistry.events, ContractRegistry.eventTypes).map { descriptor, type in
            (names: [descriptor.name, descriptor.swiftName, descriptor.table], value: (descriptor, type))
        }
        return try find(name, in: candidates, kind: "event", plural: "events")
    }

    private static func find<Value>(
        _ name: String, in candidates: [(names: [String], value: Value)], kind: String, plural: String
    ) throws(DeviceFailure)
        -> Value
    {
        let wanted = normalized(name)
        if let match = candidates.first(where: { $0.names.map(normalized).contains(wanted) }) { return match.value }
        let guess = SpellingSuggestion.closest(to: wanted, among: candidates.flatMap { $0.names.map(normalized) })
        let guessed = guess.flatMap { guess in candidates.first { $0.names.map(normalized).contains(guess) } }
        let known = "\(plural): " + candidates.compactMap { $0.names.first.map(kebab) }.joined(separator: ", ")
        throw .usage(
            "no \(kind) contract is named '\(name)'",
            hint: (guessed?.names.first).map { "did you mean '\(kebab($0))'? \(known)" } ?? known
        )
    }

    /// `ServiceAsset` → `service-asset`.
    static func kebab(_ name: String) -> String {
        var result = ""
        for character in name {
            if character.isUppercase, !result.isEmpty { result.append("-") }
            result.append(contentsOf: character.lowercased())
        }
        return result
    }

    private static func normalized(_ name: String) -> String {
        name.lowercased().filter { $0 != "-" && $0 != "_" }
    }
}

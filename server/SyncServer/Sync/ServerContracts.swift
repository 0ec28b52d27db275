import ContractRuntime

/// A storage's contracts and the reducers that fold them, with what a push looks up for every
/// mutation worked out once: the payload rules of each contract and the stored-row layout of
/// each entity.
final class ServerContracts: Sendable {
    let catalog: ContractCatalog
    let reducers: Reducers
    private let entityPayloads: [String: PayloadContract]
    private let eventPayloads: [String: PayloadContract]
    private let rowShapes: [String: RowShape]
    /// The wire names of each contract's `file` fields (current and former), for contracts that
    /// have any: what a push checks the named files of (``FileService``).
    let fileFieldNames: [String: [String]]

    init(_ catalog: ContractCatalog, reducers: [any Reducer] = []) {
        self.catalog = catalog
        self.reducers = Reducers(reducers)
        entityPayloads = Dictionary(catalog.entities.map { ($0.name, PayloadContract($0)) }, uniquingKeysWith: { first, _ in first })
        eventPayloads = Dictionary(catalog.events.map { ($0.name, PayloadContract($0)) }, uniquingKeysWith: { first, _ in first })
        rowShapes = Dictionary(catalog.entities.map { ($0.name, RowShape($0)) }, uniquingKeysWith: { first, _ in first })
        var fileFieldNames: [String: [String]] = [:]
        for (name, fields) in catalog.entities.map({ ($0.name, $0.fields) }) + catalog.events.map({ ($0.name, $0.fields) }) {
            let names = fields.filter { $0.kind == .file }.flatMap { [$0.name, $0.renamedFrom].compactMap(\.self) }
            if !names.isEmpty { fileFieldNames[name] = names }
        }
        self.fileFieldNames = fileFieldNames
    }

    /// The payload rules of an entity of the catalog (made again for one outside it).
    func payload(_ entity: EntityDescriptor) -> PayloadContract {
        entityPayloads[entity.name] ?? PayloadContract(entity)
    }

    /// The payload rules of an event of the catalog (made again for one outside it).
    func payload(_ event: EventDescriptor) -> PayloadContract {
        eventPayloads[event.name] ?? PayloadContract(event)
    }

    /// Where an entity's stored row keeps each column.
    func rowShape(_ entity: EntityDescriptor) -> RowShape {
        rowShapes[entity.name] ?? RowShape(entity)
    }
}

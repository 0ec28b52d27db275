/// One project's contracts as a value, its catalog: what an engine is given when it is made
/// (`OfflineStore(…, contracts: ContractRegistry.self)`, `SQLiteStorage(directory:contracts:)`), so
/// the engines name no contract and one process can run stores of different projects.
///
/// Lookups by name are dictionary reads: the engines make them per row and per mutation.
public struct ContractCatalog: Sendable {
    /// The sync scopes of the manifest.
    public let scopes: [ScopeDescriptor]
    /// Every entity, in the registry's order.
    public let entities: [EntityDescriptor]
    /// Every event, in the registry's order.
    public let events: [EventDescriptor]
    /// The generated type of every entity, in the order of ``entities``.
    public let entityTypes: [any ContractEntity.Type]
    /// The generated type of every event, in the order of ``events``.
    public let eventTypes: [any ContractEvent.Type]
    /// The device's SQLite migrations, in the order they must run.
    public let clientMigrations: [ContractMigration]
    /// The server's SQLite migrations, in the order they must run.
    public let serverMigrations: [ContractMigration]
    /// The server's PostgreSQL migrations, in the order they must run.
    public let serverPostgresMigrations: [ContractMigration]
    /// The subscriptions of the manifest.
    public let subscriptions: [SubscriptionDescriptor]
    /// The codec of these contracts' field values (a `ref` is stored as its target's key).
    package let codec: FieldCodec
    /// The current version of every contract, by name: what a device sends as its schema.
    public let currentVersions: [String: Int]

    /// The contracts whose writes devices sign (`signed: true`): read on every push, so kept
    /// here rather than found again per mutation.
    package let signedContracts: Set<String>
    private let entitiesByName: [String: EntityDescriptor]
    private let eventsByName: [String: EventDescriptor]
    private let scopesByName: [String: ScopeDescriptor]
    private let subscriptionsByName: [String: SubscriptionDescriptor]
    private let eventTypesByName: [String: any ContractEvent.Type]

    /// The contracts of a generated registry.
    public init(_ schema: any ContractSchema.Type) {
        self.init(
            scopes: schema.scopes, entities: schema.entities, events: schema.events,
            entityTypes: schema.entityTypes, eventTypes: schema.eventTypes,
            clientMigrations: schema.clientMigrations, serverMigrations: schema.serverMigrations,
            serverPostgresMigrations: schema.serverPostgresMigrations, subscriptions: schema.subscriptions
        )
    }

    /// A contract set from its parts (a registry's, or a test's own).
    public init(
        scopes: [ScopeDescriptor], entities: [EntityDescriptor], events: [EventDescriptor],
        entityTypes: [any ContractEntity.Type] = [], eventTypes: [any ContractEvent.Type] = [],
        clientMigrations: [ContractMigration] = [], serverMigrations: [ContractMigration] = [],
        serverPostgresMigrations: [ContractMigration] = [], subscriptions: [SubscriptionDescriptor] = []
    ) {
        self.scopes = scopes
        self.entities = entities
        self.events = events
        self.entityTypes = entityTypes
        self.eventTypes = eventTypes
        self.clientMigrations = clientMigrations
        self.serverMigrations = serverMigrations
        self.serverPostgresMigrations = serverPostgresMigrations
        self.subscriptions = subscriptions
        subscriptionsByName = Dictionary(subscriptions.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        codec = FieldCodec(entities: entities)
        var versions: [String: Int] = [:]
        for entity in entities { versions[entity.name] = entity.currentVersion }
        for event in events { versions[event.name] = event.currentVersion }
        currentVersions = versions
        entitiesByName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        signedContracts = Set(entities.filter(\.isSigned).map(\.name) + events.filter(\.isSigned).map(\.name))
        eventsByName = Dictionary(events.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        scopesByName = Dictionary(scopes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        eventTypesByName = Dictionary(eventTypes.map { ($0.descriptor.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The entity called `name`.
    public func entity(named name: String) -> EntityDescriptor? { entitiesByName[name] }

    /// The event called `name`.
    public func event(named name: String) -> EventDescriptor? { eventsByName[name] }

    /// The scope called `name`.
    public func scope(named name: String) -> ScopeDescriptor? { scopesByName[name] }

    /// The subscription called `name`.
    public func subscription(named name: String) -> SubscriptionDescriptor? { subscriptionsByName[name] }

    /// The generated type of the event called `name`.
    public func eventType(named name: String) -> (any ContractEvent.Type)? { eventTypesByName[name] }

    /// The largest row any contract allows, in stored bytes.
    public var largestRowBytes: Int {
        (entities.map(\.maxBytes) + events.map(\.maxBytes)).max() ?? RowSize.ceilingBytes
    }
}

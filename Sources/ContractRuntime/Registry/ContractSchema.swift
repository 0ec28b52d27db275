/// What a generated registry (`ContractRegistry`) provides: every contract of a project as
/// data. Client and server are written against it, so they look tables, scopes, policies and
/// versions up instead of hard-coding them, and a contract change reaches both through
/// `make codegen`.
public protocol ContractSchema {
    /// The sync scopes of the manifest.
    static var scopes: [ScopeDescriptor] { get }
    /// Every entity.
    static var entities: [EntityDescriptor] { get }
    /// Every event.
    static var events: [EventDescriptor] { get }
    /// The generated type of every entity, in the order of ``entities``.
    static var entityTypes: [any ContractEntity.Type] { get }
    /// The generated type of every event, in the order of ``events``.
    static var eventTypes: [any ContractEvent.Type] { get }
    /// The device's SQLite migrations, in the order they must run.
    static var clientMigrations: [ContractMigration] { get }
    /// The server's SQLite migrations, in the order they must run.
    static var serverMigrations: [ContractMigration] { get }
    /// The server's PostgreSQL migrations, in the order they must run.
    static var serverPostgresMigrations: [ContractMigration] { get }
    /// The subscriptions of the manifest.
    static var subscriptions: [SubscriptionDescriptor] { get }
}

extension ContractSchema {
    /// A registry generated before subscriptions existed declares none.
    public static var subscriptions: [SubscriptionDescriptor] { [] }

    /// The scope called `name`.
    public static func scope(named name: String) -> ScopeDescriptor? {
        scopes.first { $0.name == name }
    }

    /// The entity called `name`.
    public static func entity(named name: String) -> EntityDescriptor? {
        entities.first { $0.name == name }
    }

    /// The event called `name`.
    public static func event(named name: String) -> EventDescriptor? {
        events.first { $0.name == name }
    }
}

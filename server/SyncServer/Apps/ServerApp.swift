public import ContractRuntime

/// An app built on the sync server: the server-side logic of its contracts, given to the server
/// when it is made (``ServerEnvironment/apps``). The engine names no contract; what an app's
/// contracts mean beyond their declared policies lives here.
///
/// ```swift
/// struct InspectionServerApp: ServerApp {
///     var reducers: [any Reducer] { [InspectionProgressReducer()] }
/// }
/// let environment = ServerEnvironment(storage: storage, signer: signer, apps: [InspectionServerApp()])
/// ```
///
/// Every requirement has a default that does nothing. `examples/inspections` is a whole app
/// built this way.
public protocol ServerApp: Sendable {
    /// The reducers that fold the app's events, and created rows of the entities they name,
    /// into server-computed rows, inside the push that brings them.
    var reducers: [any Reducer] { get }

    /// Sets the fields the server computes on a row an operator publishes (`POST
    /// /admin/v1/content/{entity}`, seeding): `server_only` fields and those whose value is the
    /// server's to give (a revision number), from the stored row (`existing`, `nil` for a new
    /// row, deleted rows included) and the server's clock. Called in the write's transaction,
    /// before the row is compared with the stored one. `values` holds every field of the row as
    /// validated, by current name.
    func computeFields(_ values: inout [String: ColumnValue], of entity: EntityDescriptor, existing: StoredRow?, now: Timestamp)

    /// Adds the app's HTTP routes (an app's own API beside the sync protocol).
    func addRoutes(to routes: AppRoutes)

    /// The kinds of sink the app adds to the engine's `webhook`: where its operators may send
    /// the change feed, and in what form (``SinkKind``).
    var sinkKinds: [any SinkKind] { get }
}

extension ServerApp {
    /// No reducers.
    public var reducers: [any Reducer] { [] }

    /// Computes nothing: the row is stored as published.
    public func computeFields(_ values: inout [String: ColumnValue], of entity: EntityDescriptor, existing: StoredRow?, now: Timestamp) {}

    /// Adds no routes.
    public func addRoutes(to routes: AppRoutes) {}

    /// None: the engine's `webhook` alone.
    public var sinkKinds: [any SinkKind] { [] }
}

public import SyncServer

/// The site-inspection example's server side: the reducer that folds checklist results into
/// each inspection's progress, and the office's route that reviews an inspection
/// (``InspectionReview``).
///
/// ```swift
/// let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
/// let environment = ServerEnvironment(storage: storage, signer: signer, apps: [InspectionServerApp()])
/// let app = buildApplication(configuration: configuration, environment: environment)
/// ```
public struct InspectionServerApp: ServerApp {
    public init() {}

    public var reducers: [any Reducer] { [InspectionProgressReducer()] }

    public func addRoutes(to routes: AppRoutes) {
        InspectionReview.addRoute(to: routes)
    }
}

public import SyncServer

/// The field operations app's server side: the reducers that fold task status events into
/// tasks and battery swaps and issue reports into service assets.
public struct FieldOpsServerApp: ServerApp {
    public init() {}

    public var reducers: [any Reducer] { [FieldTaskReducer(), ServiceAssetReducer()] }
}

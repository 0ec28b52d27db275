import FieldOpsServer
import LearningServer
public import SyncServer

/// The sample apps the requirement documents describe, as one server runs them: learning and
/// field operations, on the generated contracts of `contracts/`.
public enum SampleServerApps {
    /// Both apps, for ``ServerEnvironment/apps``.
    public static let all: [any ServerApp] = [LearningServerApp(), FieldOpsServerApp()]

    /// Their reducers, for a `PushService` made on its own.
    public static var reducers: [any Reducer] { all.flatMap(\.reducers) }
}

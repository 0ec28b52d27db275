public import Foundation

#if canImport(Network)
    import Network
#endif

/// Tells the sync engine whether the server can be reached: going online triggers a sync, and
/// the 15-minute timer syncs only while online.
///
/// ``SystemConnectivityMonitor/make(transport:)`` picks the platform's monitor: the network path
/// on Apple platforms, a probe of the server's `/health` elsewhere. Apps that know better (a
/// user's "work offline" switch) use ``ManualConnectivityMonitor``.
public protocol ConnectivityMonitor: Sendable {
    /// Whether the server is reachable now, then every change. Each call starts a new stream;
    /// it ends when the consuming task is cancelled.
    func connectivityUpdates() -> AsyncStream<Bool>

    /// The path now, then every change: reachability and whether the path is expensive
    /// (cellular, a personal hotspot, Low Data Mode), which ``SyncPreferences/allowsExpensiveNetwork``
    /// may forbid for automatic syncs. The default reports every ``connectivityUpdates()`` as a
    /// path that is not expensive, for monitors that cannot tell.
    func pathUpdates() -> AsyncStream<NetworkPath>
}

/// What a ``ConnectivityMonitor`` knows of the network path.
public struct NetworkPath: Hashable, Sendable {
    /// Whether the server can be reached.
    public var isOnline: Bool
    /// Whether the path costs the user (cellular, hotspot, Low Data Mode).
    public var isExpensive: Bool

    /// A path that is or is not online, and expensive or not.
    public init(isOnline: Bool, isExpensive: Bool = false) {
        self.isOnline = isOnline
        self.isExpensive = isExpensive
    }
}

extension ConnectivityMonitor {
    /// Each connectivity change as a path that is not expensive.
    public func pathUpdates() -> AsyncStream<NetworkPath> {
        let updates = connectivityUpdates()
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkPath.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            for await online in updates { continuation.yield(NetworkPath(isOnline: online)) }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// Connectivity set by the app (or a test, or a command-line device's `offline on|off` and
/// `metered on|off`).
public final class ManualConnectivityMonitor: ConnectivityMonitor {
    private struct State {
        var path: NetworkPath
        var continuations: [UUID: AsyncStream<NetworkPath>.Continuation] = [:]
    }

    private let state: Locked<State>

    /// A monitor starting online or offline, and expensive or not.
    public init(online: Bool, expensive: Bool = false) {
        state = Locked(State(path: NetworkPath(isOnline: online, isExpensive: expensive)))
    }

    /// The connectivity last set.
    public var isOnline: Bool { state.withLock { $0.path.isOnline } }

    /// Whether the path was last set as expensive.
    public var isExpensive: Bool { state.withLock { $0.path.isExpensive } }

    /// Sets connectivity; observers hear of it only when it changes.
    public func setOnline(_ online: Bool) {
        update { $0.isOnline = online }
    }

    /// Sets whether the path is expensive (metered); observers hear of it only when it changes.
    public func setExpensive(_ expensive: Bool) {
        update { $0.isExpensive = expensive }
    }

    private func update(_ change: (inout NetworkPath) -> Void) {
        let (path, listeners): (NetworkPath, [AsyncStream<NetworkPath>.Continuation]) = state.withLock { state in
            var path = state.path
            change(&path)
            guard path != state.path else { return (path, []) }
            state.path = path
            return (path, Array(state.continuations.values))
        }
        for continuation in listeners { continuation.yield(path) }
    }

    /// The path last set, then each one set later.
    public func pathUpdates() -> AsyncStream<NetworkPath> {
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkPath.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let path = state.withLock { state in
            state.continuations[id] = continuation
            return state.path
        }
        continuation.yield(path)
        continuation.onTermination = { [state] _ in
            state.withLock { _ = $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Whether the path last set is online, then each change of it.
    public func connectivityUpdates() -> AsyncStream<Bool> {
        let paths = pathUpdates()
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            var last: Bool?
            for await path in paths where path.isOnline != last {
                last = path.isOnline
                continuation.yield(path.isOnline)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// Probes the server's `/health` every `interval` (through the transport, so the device token
/// and base URL are the engine's own) and reports the result when it changes. The fallback where
/// no network-path API exists, and a truer answer than the path where it does: "connected to
/// Wi-Fi" is not "the server answers".
public struct HealthProbeMonitor: ConnectivityMonitor {
    /// The transport whose `/health` is probed.
    public let transport: any SyncTransport
    /// Seconds between probes.
    public let interval: TimeInterval
    /// What waits between probes.
    public let sleeper: any Sleeper

    /// A monitor probing `transport` every `interval` seconds.
    public init(transport: any SyncTransport, interval: TimeInterval = 30, sleeper: any Sleeper = TaskSleeper()) {
        self.transport = transport
        self.interval = interval
        self.sleeper = sleeper
    }

    /// The result of a first probe, then each change between probes.
    public func connectivityUpdates() -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task { [transport, interval, sleeper] in
            var last: Bool?
            while !Task.isCancelled {
                let online = await transport.health()
                if online != last {
                    continuation.yield(online)
                    last = online
                }
                do { try await sleeper.sleep(for: interval) } catch { break }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

#if canImport(Network)
    /// The device's network path (`NWPathMonitor`): online when a usable path exists,
    /// expensive when it is (cellular, hotspot) or constrained (Low Data Mode).
    public final class NetworkPathMonitor: ConnectivityMonitor {
        /// A monitor of the system's network path.
        public init() {}

        /// The network path now, then each change, expensive when the system says so.
        public func pathUpdates() -> AsyncStream<NetworkPath> {
            let (stream, continuation) = AsyncStream.makeStream(of: NetworkPath.self, bufferingPolicy: .bufferingNewest(1))
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in
                continuation.yield(NetworkPath(isOnline: path.status == .satisfied, isExpensive: path.isExpensive || path.isConstrained))
            }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "outpost.connectivity"))
            return stream
        }

        /// Whether the network path is satisfied now, then each change.
        public func connectivityUpdates() -> AsyncStream<Bool> {
            let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in continuation.yield(path.status == .satisfied) }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "outpost.connectivity"))
            return stream
        }
    }
#endif

/// The platform's connectivity monitor.
public enum SystemConnectivityMonitor {
    /// `NWPathMonitor` on Apple platforms; a ``HealthProbeMonitor`` on `transport` elsewhere.
    public static func make(transport: any SyncTransport) -> any ConnectivityMonitor {
        #if canImport(Network)
            NetworkPathMonitor()
        #else
            HealthProbeMonitor(transport: transport)
        #endif
    }
}

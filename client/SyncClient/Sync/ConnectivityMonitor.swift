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
}

/// Connectivity set by the app (or a test, or a command-line device's `offline on|off`).
public final class ManualConnectivityMonitor: ConnectivityMonitor {
    private struct State {
        var online: Bool
        var continuations: [UUID: AsyncStream<Bool>.Continuation] = [:]
    }

    private let state: Locked<State>

    public init(online: Bool) {
        state = Locked(State(online: online))
    }

    /// The connectivity last set.
    public var isOnline: Bool { state.withLock { $0.online } }

    /// Sets connectivity; observers hear of it only when it changes.
    public func setOnline(_ online: Bool) {
        let listeners: [AsyncStream<Bool>.Continuation] = state.withLock { state in
            guard state.online != online else { return [] }
            state.online = online
            return Array(state.continuations.values)
        }
        for continuation in listeners { continuation.yield(online) }
    }

    public func connectivityUpdates() -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let online = state.withLock { state in
            state.continuations[id] = continuation
            return state.online
        }
        continuation.yield(online)
        continuation.onTermination = { [state] _ in
            state.withLock { _ = $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }
}

/// Probes the server's `/health` every `interval` (through the transport, so the device token
/// and base URL are the engine's own) and reports the result when it changes. The fallback where
/// no network-path API exists, and a truer answer than the path where it does: "connected to
/// Wi-Fi" is not "the server answers".
public struct HealthProbeMonitor: ConnectivityMonitor {
    public let transport: any SyncTransport
    /// Seconds between probes.
    public let interval: TimeInterval
    public let sleeper: any Sleeper

    public init(transport: any SyncTransport, interval: TimeInterval = 30, sleeper: any Sleeper = TaskSleeper()) {
        self.transport = transport
        self.interval = interval
        self.sleeper = sleeper
    }

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
    /// The device's network path (`NWPathMonitor`): online when a usable path exists.
    public final class NetworkPathMonitor: ConnectivityMonitor {
        public init() {}

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

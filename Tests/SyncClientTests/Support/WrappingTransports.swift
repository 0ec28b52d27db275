import Foundation
import SyncClient
import SyncProtocol

/// A transport that fails with a network error while `offline` is set, otherwise forwards.
final class SwitchableTransport: SyncTransport {
    let inner: any SyncTransport
    private let state = LockedFlag()

    init(_ inner: any SyncTransport) { self.inner = inner }

    var offline: Bool {
        get { state.value }
        set { state.value = newValue }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        if offline { throw .network("offline") }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        if offline { throw .network("offline") }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        if offline { throw .network("offline") }
        return try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { offline ? false : await inner.health() }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool {
        get { lock.withLock { flag } }
        set { lock.withLock { flag = newValue } }
    }
}

/// Forwards to a real transport, counting requests; pushes can be held at a gate until
/// ``release()``, to line up triggers while a sync is in flight.
final class RecordingTransport: SyncTransport, @unchecked Sendable {
    let inner: any SyncTransport
    private let lock = NSLock()
    private var pushes: [PushRequest] = []
    private var pullCount = 0
    private var urgentScopes: [String] = []
    private var gateClosed = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ inner: any SyncTransport) { self.inner = inner }

    var pushRequests: [PushRequest] { lock.withLock { pushes } }
    /// Unfiltered pull requests: one per scope and sync while a page holds the scope (a first
    /// download's priority tiers come before it, filtered, and are not counted).
    var pulls: Int { lock.withLock { pullCount } }
    /// The scopes whose urgent changes were asked for, in order.
    var urgentRequests: [String] { lock.withLock { urgentScopes } }
    /// Pushes waiting at the gate.
    var heldPushes: Int { lock.withLock { waiting.count } }

    /// Holds every push from now on until ``release()``.
    func hold() { lock.withLock { gateClosed = true } }

    func release() {
        let resumed: [CheckedContinuation<Void, Never>] = lock.withLock {
            gateClosed = false
            defer { waiting = [] }
            return waiting
        }
        for continuation in resumed { continuation.resume() }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go: Bool = lock.withLock {
                pushes.append(request)
                if gateClosed { waiting.append(continuation) }
                return !gateClosed
            }
            if go { continuation.resume() }
        }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        if contracts == nil { lock.withLock { pullCount += 1 } }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        lock.withLock { urgentScopes.append(scope) }
        return try await inner.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
    }

    func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        try await inner.liveEvents()
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { await inner.health() }
}

/// The real server as it answers once it no longer supports this build's version of one
/// contract: any push or pull whose `schema` names that contract gets the server's 426, with
/// `last_seq` read from the server itself (an empty push answers it).
final class UpgradedServerTransport: SyncTransport {
    let inner: any SyncTransport
    let contract: String
    let oldestSupported: Int

    init(_ inner: any SyncTransport, refusing contract: String, oldestSupported: Int) {
        self.inner = inner
        self.contract = contract
        self.oldestSupported = oldestSupported
    }

    private func refusal(clientID: String, schema: [String: Int], push: Bool) async throws(TransportError) -> TransportError {
        var lastSeq: Int64?
        if push {
            var otherSchema = schema
            otherSchema[contract] = nil
            lastSeq = try await inner.push(PushRequest(clientId: clientID, schema: otherSchema, mutations: [])).lastSeq
        }
        let requirement = UpdateRequired(entity: contract, oldestSupported: oldestSupported, current: oldestSupported)
        return .updateRequired(requirement, lastSeq: lastSeq)
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        if let version = request.schema[contract], version < oldestSupported {
            throw try await refusal(clientID: request.clientId, schema: request.schema, push: true)
        }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        if let version = schema[contract], version < oldestSupported {
            throw try await refusal(clientID: clientID, schema: schema, push: false)
        }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        if let version = schema[contract], version < oldestSupported {
            throw try await refusal(clientID: clientID, schema: schema, push: false)
        }
        return try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func health() async -> Bool { await inner.health() }
}

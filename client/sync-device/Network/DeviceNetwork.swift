import ContractRuntime
import Contracts
import Foundation
import LearningAPI
import LearningClient
import SyncClient
import SyncProtocol

/// The device's transport: the server over URLSession, except while the home folder's offline
/// flag is set (`offline on`), when every request (syncs and downloads alike) fails with a
/// network error exactly as a lost connection does. It also keeps what the server answered, for
/// the sync summary.
final class DeviceNetwork: SyncTransport, @unchecked Sendable {
    /// A pushed mutation and the server's answer to it.
    struct Outcome {
        var mutation: Mutation
        var result: MutationResult
    }

    private let server: any SyncTransport
    private let home: DeviceHome
    private let lock = NSLock()
    private var outcomes: [Outcome] = []
    private var pulled: [String: Int] = [:]
    private var liveFailure: TransportError?
    private var fileBytesObserver: (@Sendable (Int64) -> Void)?
    private var partialRows = 0
    /// The changed-fields pages counted lately, by scope, with the cursor each was asked from:
    /// when the engine cannot merge one, it asks the same pages again whole from that cursor,
    /// and what the refused pages counted is taken back (their rows were not stored).
    private var changedFieldPages: [String: [(cursor: String?, pulled: [String: Int], partial: Int)]] = [:]
    /// How long each request waits before it goes (`OUTPOST_NETWORK_DELAY_MS`): a slow link.
    private let delay: Duration?

    init(server: any SyncTransport, home: DeviceHome, delay: Duration? = DeviceNetwork.delayFromEnvironment) {
        self.server = server
        self.home = home
        self.delay = delay
    }

    /// `OUTPOST_NETWORK_DELAY_MS`: milliseconds each request waits before it goes, as on a slow
    /// link (tests of background windows, demos).
    static let delayVariable = "OUTPOST_NETWORK_DELAY_MS"

    static var delayFromEnvironment: Duration? {
        ProcessInfo.processInfo.environment[delayVariable].flatMap(Int.init).flatMap { $0 > 0 ? .milliseconds($0) : nil }
    }

    /// Whether the network is switched off right now.
    var isSwitchedOff: Bool { home.isOffline }

    /// Every push answer received so far, in order.
    var pushOutcomes: [Outcome] { lock.withLock { outcomes } }

    /// Rows (upserts and deletes) pulled so far, by contract name.
    var pulledRows: [String: Int] { lock.withLock { pulled } }

    /// Rows pulled with only their changed fields (`_base_version`, `fields=changed`) so far.
    var changedFieldRows: Int { lock.withLock { partialRows } }

    /// Why the live channel last failed to open, if it did: `watch` names it when it ends
    /// without the channel (the engine only says the channel is unavailable).
    var lastLiveFailure: TransportError? { lock.withLock { liveFailure } }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        try await push(request, sent: { _ in })
    }

    func push(_ request: PushRequest, sent: @Sendable (Int) -> Void) async throws(TransportError) -> PushResponse {
        try await beforeRequest()
        let response = try await server.push(request, sent: sent)
        let byID = Dictionary(request.mutations.map { ($0.clientMutationId, $0) }, uniquingKeysWith: { first, _ in first })
        lock.withLock {
            for result in response.results {
                if let mutation = byID[result.clientMutationId] { outcomes.append(Outcome(mutation: mutation, result: result)) }
            }
        }
        return response
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    var filtersPullsByContract: Bool { server.filtersPullsByContract }

    var pushCompressionRefused: Bool { server.pushCompressionRefused }

    func rememberPushCompressionRefused() { server.rememberPushCompressionRefused() }

    func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        try await beforeRequest()
        do {
            return try await server.liveEvents()
        } catch {
            lock.withLock { liveFailure = error }
            throw error
        }
    }

    func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        try await beforeRequest()
        return try await server.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts, changedFields: false)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
    ) async throws(TransportError) -> Data {
        try await beforeRequest()
        let body = try await server.pull(
            scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts, changedFields: changedFields)
        // Counted for the report; a body that is not a page is the engine's to refuse.
        if let page = try? PullResponse(json: body) {
            lock.withLock {
                if !changedFields, let refused = changedFieldPages[scope]?.firstIndex(where: { $0.cursor == cursor }) {
                    // The engine asks again whole what it could not merge: the refused pages stored nothing.
                    for taken in changedFieldPages[scope]![refused...] {
                        for (contract, count) in taken.pulled {
                            pulled[contract, default: 0] -= count
                            if pulled[contract] == 0 { pulled[contract] = nil }
                        }
                        partialRows -= taken.partial
                    }
                    changedFieldPages[scope] = nil
                }
                var counted: [String: Int] = [:]
                var partial = 0
                for (contract, rows) in page.upserts {
                    counted[contract, default: 0] += rows.count
                    partial +=
                        rows.filter { row in
                            if case .object(let fields) = row { return fields["_base_version"] != nil }
                            return false
                        }.count
                }
                for (contract, ids) in page.deletes { counted[contract, default: 0] += ids.count }
                for (contract, count) in counted { pulled[contract, default: 0] += count }
                partialRows += partial
                if changedFields {
                    // A refused run of pages is one commit's at most: the last few are enough.
                    changedFieldPages[scope, default: []].append((cursor, counted, partial))
                    if changedFieldPages[scope]!.count > 256 { changedFieldPages[scope]!.removeFirst() }
                }
            }
        }
        return body
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        try await beforeRequest()
        let response = try await server.pullSubscriptions(request, schema: schema, clientID: clientID)
        lock.withLock {
            for page in response.subscriptions {
                for (contract, rows) in page.upserts { pulled[contract, default: 0] += rows.count }
                for (contract, ids) in page.deletes { pulled[contract, default: 0] += ids.count }
            }
        }
        return response
    }

    // MARK: Files (the rows' `file` fields)

    /// Called with the size of each piece of a file the server sends (`sync-device file`'s
    /// progress): set before a download, `nil` for none.
    func observeFileBytes(_ observer: (@Sendable (Int64) -> Void)?) {
        lock.withLock { fileBytesObserver = observer }
    }

    func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        try await beforeRequest()
        return try await server.startFileUpload(request)
    }

    func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64 {
        try await beforeRequest()
        return try await server.fileUploadOffset(uploadID: uploadID)
    }

    func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer {
        try await beforeRequest()
        return try await server.sendFileBytes(bytes, uploadID: uploadID, offset: offset)
    }

    func abandonFileUpload(uploadID: String) async throws(TransportError) {
        try await beforeRequest()
        try await server.abandonFileUpload(uploadID: uploadID)
    }

    func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        try await beforeRequest()
        let chunk = try await server.fileBytes(sha256: sha256, range: range)
        lock.withLock { fileBytesObserver }?(Int64(chunk.data.count))
        return chunk
    }

    func fileBytes(sha256: String, range: ClosedRange<Int64>, into destination: URL) async throws(TransportError) -> ReceivedFileBytes {
        try await beforeRequest()
        let received = try await server.fileBytes(sha256: sha256, range: range, into: destination)
        lock.withLock { fileBytesObserver }?(received.byteCount)
        return received
    }

    func health() async -> Bool {
        guard !isSwitchedOff else { return false }
        return await server.health()
    }

    private func requireNetwork() throws(TransportError) {
        if isSwitchedOff { throw .network("the network is switched off (sync-device offline on)") }
    }

    /// Before each request: the network must be on, and a slow link's delay passes.
    private func beforeRequest() async throws(TransportError) {
        try requireNetwork()
        guard let delay else { return }
        do {
            try await Task.sleep(for: delay)
        } catch {
            throw .network("the request was cancelled")
        }
    }
}

extension TransportError {
    /// One line for a person: what failed, without the transport's internals.
    var summary: String {
        switch self {
        case .network(let message): return "the server cannot be reached: \(message)"
        case .http(let status, let body, _):
            return "the server refused the request (HTTP \(status))" + (body.map { ": \($0.error.message)" } ?? "")
        case .decoding(let message): return "the server's answer could not be read: \(message)"
        case .updateRequired(let requirement, _):
            return "this device is too old for the server (\(requirement.entity ?? "a contract")): update sync-device"
        case .publicKeyPinMismatch: return pinMismatchMessage ?? "the server's public key is not pinned"
        }
    }

    /// The device failure of a transport error (exit code 3).
    var failure: DeviceFailure {
        switch self {
        case .network:
            return .network(summary, hint: "check the server address and the network (`sync-device status`); changes stay queued")
        case .http(401, _, _):
            return .network(summary, hint: "the token was refused; log in again with a new token")
        case .publicKeyPinMismatch:
            return .network(
                summary, hint: "nothing was sent; if the server's key was replaced on purpose, log in again with its pin (--pin-sha256)")
        default:
            return .network(summary)
        }
    }
}

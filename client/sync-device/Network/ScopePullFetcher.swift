import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol

/// The read-through of the device (docs/client.md: "when nothing is cached and the device is online:
/// one fetch, stored, then returned"): pulls the scope that holds the requested contract, from
/// the device's cursor on, exactly as a sync would, without pushing anything.
///
/// Every page but the last is applied here with its cursor, each in its own transaction; the
/// last one is handed back for ``OfflineStore/readThrough(_:from:read:isCached:)`` to apply.
struct ScopePullFetcher: RemoteFetcher {
    let store: OfflineStore
    let network: DeviceNetwork
    let scopes: [String]

    func fetch(_ request: RemoteFetchRequest) async throws -> ServerChanges {
        guard let entity = ContractRegistry.entity(named: request.contract), let scope = ContractRegistry.scope(named: entity.scope) else {
            throw RemoteFetchFailure.invalidResponse("no contract named \(request.contract)")
        }
        let keys = scopes.filter { Self.key($0, fits: scope) }
        guard !keys.isEmpty else { throw RemoteFetchFailure.notFound }
        var last: ServerChanges?
        for key in keys {
            var cursor = try store.cursor(forScope: key)
            while true {
                let page: PullResponse
                do {
                    page = try PullResponse(
                        json: try await network.pull(
                            scope: key, cursor: cursor, limit: nil, schema: store.schemaVersions, clientID: store.identity.clientId
                        ))
                } catch let error as TransportError {
                    if case .network = error { throw RemoteFetchFailure.offline }
                    throw RemoteFetchFailure.server(error.detail)
                } catch {
                    throw RemoteFetchFailure.invalidResponse("a pull page: \(error)")
                }
                if let previous = last { try store.applyServerChanges(previous) }
                last = ServerChanges(pull: page, scopeKey: key)
                cursor = page.cursor
                if !page.hasMore { break }
            }
        }
        return last ?? ServerChanges()
    }

    /// Whether a scope key is one of `scope`'s (its template with the placeholders filled).
    static func key(_ key: String, fits scope: ScopeDescriptor) -> Bool {
        let literal = scope.keyTemplate.split(separator: "{", maxSplits: 1).first.map(String.init) ?? scope.keyTemplate
        return scope.placeholders.isEmpty ? key == scope.keyTemplate : key.hasPrefix(literal)
    }
}

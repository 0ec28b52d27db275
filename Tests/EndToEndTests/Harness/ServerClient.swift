import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The test's own HTTP calls to a running server: publishing content with an admin token, and
/// pulling a scope as a device would, to know what the server holds (the oracle the devices are
/// compared with).
struct ServerClient {
    let base: URL

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Publishes a row of a read-only scope (`POST /admin/v1/content/{entity}`).
    func publish(_ entity: String, _ row: [String: JSONValue], adminToken: String) async throws {
        var request = URLRequest(url: base.appendingPathComponent("admin/v1/content/\(entity)"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(JSONValue.object(row))
        _ = try await send(request, token: adminToken)
    }

    /// The JSON of an admin route answering `GET` (`admin/v1/fleet`).
    func adminGet(_ path: String, adminToken: String) async throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: try await send(URLRequest(url: base.appendingPathComponent(path)), token: adminToken))
    }

    /// Deletes a row of a read-only scope (`DELETE /admin/v1/content/{entity}/{id}`).
    func delete(_ entity: String, id: String, adminToken: String) async throws {
        var request = URLRequest(url: base.appendingPathComponent("admin/v1/content/\(entity)/\(id)"))
        request.httpMethod = "DELETE"
        _ = try await send(request, token: adminToken)
    }

    /// Uploads the file of a published `Asset` row (`PUT /admin/v1/assets/{id}`).
    func uploadAsset(id: String, data: Data, contentType: String, adminToken: String) async throws {
        var request = URLRequest(url: base.appendingPathComponent("admin/v1/assets/\(id)"))
        request.httpMethod = "PUT"
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.httpBody = data
        _ = try await send(request, token: adminToken)
    }

    /// One page of a scope, as `clientID` would pull it with this build's schema versions.
    func pull(
        scope: String, cursor: String?, limit: Int?, token: String, clientID: String, contracts: [String]? = nil
    ) async throws -> PullResponse {
        var components = URLComponents(url: base.appendingPathComponent("sync/v1/pull"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "scope", value: scope)]
        if let cursor { components.queryItems?.append(URLQueryItem(name: "cursor", value: cursor)) }
        if let limit { components.queryItems?.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let contracts { components.queryItems?.append(URLQueryItem(name: "contracts", value: contracts.joined(separator: ","))) }
        var request = URLRequest(url: components.url!)
        request.setValue(SchemaHeader.encode(ContractCatalog(ContractRegistry.self).currentVersions), forHTTPHeaderField: ProtocolHeaders.schema)
        request.setValue(clientID, forHTTPHeaderField: ProtocolHeaders.clientID)
        return try JSONDecoder().decode(PullResponse.self, from: try await send(request, token: token))
    }

    /// Every page of a scope after `cursor` (from the beginning when `nil`), in order; only
    /// `contracts`' rows when given.
    func pullAll(
        scope: String, from cursor: String? = nil, limit: Int?, token: String, clientID: String, contracts: [String]? = nil
    ) async throws -> [PullResponse] {
        var pages: [PullResponse] = []
        var cursor = cursor
        repeat {
            let page = try await pull(scope: scope, cursor: cursor, limit: limit, token: token, clientID: clientID, contracts: contracts)
            pages.append(page)
            cursor = page.cursor
        } while pages.last!.hasMore
        return pages
    }

    private func send(_ request: URLRequest, token: String) async throws -> Data {
        var request = request
        request.timeoutInterval = 30
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
            throw Failure(
                description: "\(request.httpMethod ?? "GET") \(request.url!.path) answered \(response): \(String(decoding: data, as: UTF8.self))"
            )
        }
        return data
    }
}

/// What the server holds in one scope: entity rows in wire form, by contract and id, after
/// applying pulled pages in order (upserts, then deletes).
struct ScopeContents: Equatable, CustomStringConvertible {
    var rows: [String: [String: [String: JSONValue]]] = [:]

    /// The contents after `pages`; event envelopes travelling down are left out (the exactly-once
    /// checks cover events).
    init(pages: some Sequence<PullResponse>) {
        apply(pages)
    }

    init(rows: [String: [String: [String: JSONValue]]]) {
        self.rows = rows.filter { !$0.value.isEmpty }
    }

    /// Applies pulled pages in order, as a device does.
    mutating func apply(_ pages: some Sequence<PullResponse>) {
        for page in pages {
            for (contract, upserts) in page.upserts where ContractRegistry.entity(named: contract) != nil {
                let key = ContractRegistry.entity(named: contract)!.primaryKey
                for case .object(let row) in upserts {
                    guard case .string(let id)? = row[key] else { continue }
                    rows[contract, default: [:]][id] = Self.withoutNulls(row)
                }
            }
            for (contract, ids) in page.deletes {
                for id in ids { rows[contract]?[id] = nil }
            }
        }
        rows = rows.filter { !$0.value.isEmpty }
    }

    /// Ids by contract, for short failure messages.
    var ids: [String: Set<String>] { rows.mapValues { Set($0.keys) } }

    var description: String {
        rows.keys.sorted().map { "\($0): \(rows[$0]!.keys.sorted().joined(separator: ", "))" }.joined(separator: "; ")
    }

    /// A row as compared: an absent optional field and a null one are the same.
    static func withoutNulls(_ row: [String: JSONValue]) -> [String: JSONValue] {
        row.filter { $0.value != .null }
    }
}

public import ContractRuntime
public import SyncProtocol

/// Why a ``RemoteFetcher`` could not fetch.
public enum RemoteFetchFailure: Error, Hashable, Sendable {
    /// No connection (or the server is unreachable).
    case offline
    /// The server has no such row.
    case notFound
    /// The server refused or failed (its error body).
    case server(ErrorDetail)
    /// The answer could not be used (malformed, or rows that do not fit their contracts).
    case invalidResponse(String)
}

/// What a read-through wants from the server: one row (optionally with related rows, by
/// relation names of the contracts, dotted for nested ones) or every row of a contract the
/// device may read.
public struct RemoteFetchRequest: Hashable, Sendable {
    /// The contract name (`Unit`).
    public var contract: String
    /// One row's primary key, or `nil` for every row.
    public var id: String?
    /// Relations to include: `["lessons", "lessons.assets"]`.
    public var including: [String]

    /// A request for one row of `contract` (or every row, with a `nil` id) and the relations named.
    public init(contract: String, id: String?, including: [String] = []) {
        self.contract = contract
        self.id = id
        self.including = including
    }

    /// One row of `E`, with related rows.
    public static func row<E: ContractEntity>(_ type: E.Type, id: String, including: [String] = []) -> Self {
        Self(contract: E.descriptor.name, id: id, including: including)
    }

    /// Every row of `E` the device may read.
    public static func all<E: ContractEntity>(_ type: E.Type, including: [String] = []) -> Self {
        Self(contract: E.descriptor.name, id: nil, including: including)
    }
}

/// Fetches rows from the server for a read-through. The sync engine implements it over its
/// transport (for units, `GET /api/v1/content/units/sync`; otherwise a pull of the scope).
///
/// Throw ``RemoteFetchFailure/offline`` when there is no connection; any other error becomes
/// ``ReadResult/unavailable(_:)``.
public protocol RemoteFetcher: Sendable {
    /// The rows the request names, as server changes (wire rows by contract name).
    func fetch(_ request: RemoteFetchRequest) async throws -> ServerChanges
}

import ContractRuntime
import Foundation
import Hummingbird
import SyncProtocol

/// The admin routes of sinks (`/admin/v1/sinks…`), on the admin's tenant (``SinkAdministration``).
struct SinkRoutes: Sendable {
    let administration: SinkAdministration
    let delivery: SinkDelivery
    /// How long a replayed letter's exchange may take (``SinkDeliveryConfiguration/requestTimeout``).
    let replayTimeout: Duration
    let storage: any SyncStorage
    /// The byte budget and shared memory of the listing routes (list, show, dead letters).
    let listing: ListingBudget

    init(
        storage: any SyncStorage, clock: any ServerClock, delivery: SinkDelivery, configuration: ServerConfiguration = ServerConfiguration(),
        listing: ListingBudget? = nil, kinds: SinkKinds = SinkKinds()
    ) {
        self.storage = storage
        self.listing =
            listing
            ?? ListingBudget(
                pageBytes: configuration.pageBytes, memory: ResponseMemoryBudget(capacity: configuration.responseMemoryBytes),
                largestItemBytes: configuration.maximumBodyBytes)
        administration = SinkAdministration(
            storage: storage, clock: clock, outbound: OutboundAddressPolicy(allowList: configuration.outboundAllowList),
            sinksPerTenant: configuration.identityLimits.sinksPerTenant, kinds: kinds)
        self.delivery = delivery
        replayTimeout = configuration.sinks.requestTimeout
    }

    /// `POST /admin/v1/sinks` `{"url", "secret", "id"?, "kind"?, "contracts"?, "from_start"?, <kind>?}`:
    /// 201 with the sink (its secrets never shown again). The settings of a kind other than
    /// `webhook` are an object of strings under the kind's name (`"xapi": {"user": …}`).
    @Sendable func add(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        guard case .object(let body) = try await request.jsonBody(limit: 16 * 1024, maximumDepth: 4) else {
            throw ServiceError.malformed("the body must be a JSON object: {\"url\": …, \"secret\": …}")
        }
        let kind = try Self.string("kind", in: body) ?? "webhook"
        let known: Set<String> = ["id", "kind", "url", "contracts", "secret", "from_start", kind]
        if let unknown = body.keys.sorted().first(where: { !known.contains($0) }) { throw ServiceError.malformed("unknown member `\(unknown)`") }
        guard case .string(let url)? = body["url"] else { throw ServiceError.malformed("`url` (a string) is required") }
        guard case .string(let secret)? = body["secret"] else { throw ServiceError.malformed("`secret` (a string) is required") }
        var sink = SinkAdministration.Request(url: url, secret: secret)
        sink.id = try Self.string("id", in: body)
        sink.kind = kind
        switch body["contracts"] {
        case nil, .null?: break
        case .array(let names)?:
            sink.contracts = try names.map { name in
                guard case .string(let text) = name else { throw ServiceError.malformed("`contracts` is an array of contract names") }
                return text
            }
        default: throw ServiceError.malformed("`contracts` is an array of contract names")
        }
        switch body["from_start"] {
        case nil, .null?: break
        case .bool(let flag)?: sink.fromStart = flag
        default: throw ServiceError.malformed("`from_start` is a boolean")
        }
        switch body[kind] {
        case nil, .null?: break
        case .object(let settings)?:
            sink.settings = try settings.mapValues { value in
                guard case .string(let text) = value else { throw ServiceError.malformed("`\(kind)` holds the kind's settings, each a string") }
                return text
            }
        default: throw ServiceError.malformed("`\(kind)` holds the kind's settings: an object of strings")
        }
        let added = try await ServiceError.catchingStorageFailures { try await administration.add(sink, tenant: tenant) }
        delivery.sinkAdded()
        return Response.json(encoded: Data(CanonicalJSON.bytes(added.json)), status: .created, request: request)
    }

    /// `GET /admin/v1/sinks`: the tenant's sinks and where each one is.
    /// A page is bounded in bytes (``ListingBudget``); `after=ID` continues after the sink `ID`
    /// (the page's `cursor`) when `has_more` says so.
    @Sendable func list(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let after = request.query("after").flatMap { $0.isEmpty ? nil : $0 }
        if let after { try Identifier.require(after, as: "after") }
        let lease = try await listing.reserve()
        let sinks = try await ServiceError.catchingStorageFailures { try await administration.sinks(tenant: tenant) }
        let items = sinks.filter { after == nil || $0.id > after! }.map { (id: $0.id, json: Data(CanonicalJSON.bytes($0.json))) }
        let (page, hasMore) = listing.prefix(items) { $0.json.count }
        var body = Data("{\"cursor\":".utf8)
        body += Data(CanonicalJSON.bytes((page.last?.id ?? after).map(JSONValue.string) ?? .null))
        body += Data(",\"has_more\":\(hasMore),\"sinks\":[".utf8)
        for (index, item) in page.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += item.json
        }
        body += Data("]}".utf8)
        return listing.respond(body, request: request, lease: lease)
    }

    /// `GET /admin/v1/sinks/{sink}`.
    @Sendable func show(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let id = try RequestInput.parameter("sink", context)
        let lease = try await listing.reserve()
        let sink = try await ServiceError.catchingStorageFailures { try await administration.sink(tenant: tenant, id: id) }
        return listing.respond(Data(CanonicalJSON.bytes(sink.json)), request: request, lease: lease)
    }

    /// `DELETE /admin/v1/sinks/{sink}`: the sink and its dead letters go.
    @Sendable func remove(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let id = try RequestInput.parameter("sink", context)
        try await ServiceError.catchingStorageFailures { try await administration.remove(tenant: tenant, id: id) }
        return try .json(["removed": id], request: request)
    }

    /// `GET /admin/v1/sinks/{sink}/dead-letters?after=N&limit=N`: refused batches, oldest first,
    /// each with the body that was sent. A page is bounded in bytes (``ListingBudget``): the
    /// letters' sizes are read first, and only those the page takes are read whole; `has_more`
    /// and `cursor` (the last letter's id, for `after`) say where the next page starts.
    @Sendable func deadLetters(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let id = try RequestInput.parameter("sink", context)
        var after: Int64 = 0
        if let text = request.query("after") {
            guard let number = Int64(text), number >= 0 else { throw ServiceError.malformed("`after` is a dead letter's id") }
            after = number
        }
        let limit = try RequestInput.limit(request) ?? 100
        guard (1...1000).contains(limit) else { throw ServiceError.malformed("`limit` must be from 1 to 1000") }
        let lease = try await listing.reserve()
        let (from, budget) = (after, listing)
        let sizes = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                try await reader.serverTableQuery(
                    "SELECT LENGTH(body) + COALESCE(LENGTH(response), 0) + 256 AS bytes FROM sink_dead_letters "
                        + "WHERE tenant = ? AND sink_id = ? AND id > ? ORDER BY id LIMIT ?",
                    [.text(tenant), .text(id), .integer(from), .integer(Int64(limit + 1))])
            }
        }
        let (taken, hasMore) = budget.prefix(sizes, limit: limit) { Int($0.integer("bytes") ?? 0) }
        let letters = try await ServiceError.catchingStorageFailures {
            try await administration.deadLetters(tenant: tenant, sinkID: id, after: from, limit: max(1, taken.count))
        }.prefix(taken.count)
        let json = letters.map { letter -> JSONValue in
            guard case .object(var object) = letter.json else { return letter.json }
            object["body"] = .string(letter.body)
            return .object(object)
        }
        let page: JSONValue = .object([
            "dead_letters": .array(json), "has_more": .bool(hasMore), "cursor": .string(String(letters.last?.id ?? after)),
        ])
        return listing.respond(Data(CanonicalJSON.bytes(page)), request: request, lease: lease)
    }

    /// `POST /admin/v1/sinks/{sink}/dead-letters/replay` `{"ids": [1, 2]}` (or `{}` for every
    /// one): sends them again now, and says what became of each: the receiver's status and its
    /// fixed category, or why it was not delivered (`timeout`, `connection_failed`,
    /// `refused_address`), never the receiver's words.
    @Sendable func replay(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let id = try RequestInput.parameter("sink", context)
        guard case .object(let body) = try await request.jsonBody(limit: 64 * 1024, maximumDepth: 4) else {
            throw ServiceError.malformed("the body must be {\"ids\": [...]} or {}")
        }
        var ids: [Int64]?
        switch body["ids"] {
        case nil, .null?: break
        case .array(let values)?:
            ids = try values.map { value in
                guard case .int(let number) = value else { throw ServiceError.malformed("`ids` is an array of dead letter ids") }
                return number
            }
        default: throw ServiceError.malformed("`ids` is an array of dead letter ids")
        }
        let replays = try await ServiceError.catchingStorageFailures {
            try await administration.replay(tenant: tenant, sinkID: id, ids: ids, timeout: replayTimeout)
        }
        return Response.json(encoded: Data(CanonicalJSON.bytes(.object(["replayed": .array(replays.map(\.json))]))), request: request)
    }

    private static func string(_ name: String, in object: [String: JSONValue]) throws(ServiceError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw ServiceError.malformed("`\(name)` is a string")
        }
    }
}

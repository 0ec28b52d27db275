package import ContractRuntime
import Foundation
import SyncProtocol

/// Adding, listing and removing sinks and replaying their dead letters: what the admin routes
/// (`/admin/v1/sinks`) and `sync-server sinks` both do, with the same checks.
package struct SinkAdministration: Sendable {
    let store: SinkStore
    let storage: any SyncStorage
    let clock: any ServerClock
    /// Where replays may connect, and which URLs are refused when a sink is added.
    let outbound: OutboundAddressPolicy
    /// Sinks one tenant may hold (``IdentityStateLimits/sinksPerTenant``).
    let sinksPerTenant: Int
    /// The kinds a sink may be of.
    let kinds: SinkKinds

    package init(
        storage: any SyncStorage, clock: any ServerClock = SystemClock(), outbound: OutboundAddressPolicy = OutboundAddressPolicy(),
        sinksPerTenant: Int = IdentityStateLimits().sinksPerTenant, kinds: SinkKinds = SinkKinds()
    ) {
        self.storage = storage
        self.kinds = kinds
        store = SinkStore(storage: storage)
        self.clock = clock
        self.outbound = outbound
        self.sinksPerTenant = sinksPerTenant
    }

    /// What a new sink is to be.
    package struct Request: Sendable {
        package var id: String?
        /// The name of its kind (``SinkKind/name``).
        package var kind = "webhook"
        package var url: String
        package var contracts: [String]?
        package var secret: String
        /// Deliver the whole change feed kept, not only what is applied from now on.
        package var fromStart = false
        /// Its kind's settings, as the operator gave them.
        package var settings: [String: String] = [:]

        package init(url: String, secret: String) {
            self.url = url
            self.secret = secret
        }
    }

    /// The shortest signing secret taken: HMAC-SHA256 wants a key that cannot be guessed.
    package static let minimumSecretBytes = 16

    /// Checks and adds a sink to `tenant`; it starts at the change feed's end unless `fromStart`.
    ///
    /// - Throws: ``ServiceError`` 400 for a bad URL (not http or https, a port outside 1–65535,
    ///   credentials in it, or a host that is an address outbound requests may not reach,
    ///   `refused_address`), secret, id, contract, kind or setting of its kind; 409 `sink_exists` for an id
    ///   taken, 409 `limit_reached` when the tenant holds ``sinksPerTenant`` sinks already.
    package func add(_ request: Request, tenant: String) async throws -> Sink {
        try requireReachableURL(request.url, as: "url")
        guard request.secret.utf8.count >= Self.minimumSecretBytes else {
            throw ServiceError.malformed(
                "the signing secret must be at least \(Self.minimumSecretBytes) bytes (make one with `openssl rand -hex 32`)")
        }
        let id = request.id ?? "snk_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        try Identifier.require(id, as: "sink id")
        guard id.count <= 64, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
            throw ServiceError.malformed("a sink id is 1 to 64 ASCII letters, digits, `_` or `-`, not '\(id)'")
        }
        let catalog = storage.contracts
        if let contracts = request.contracts {
            guard !contracts.isEmpty else { throw ServiceError.malformed("`contracts` names at least one contract (leave it out for all)") }
            if let unknown = contracts.first(where: { catalog.entity(named: $0) == nil && catalog.event(named: $0) == nil }) {
                throw ServiceError(status: 400, .unknownEntity, "'\(unknown)' is not a contract of this server")
            }
        }
        guard let kind = kinds.kind(named: request.kind) else {
            throw ServiceError.malformed("`kind` is one of \(kinds.names.joined(separator: ", ")), not '\(request.kind)'")
        }
        let settings: SinkSettings
        do {
            settings = try kind.configure(request.settings, contracts: request.contracts, catalog: catalog)
        } catch {
            throw error.isUnknownContract ? ServiceError(status: 400, .unknownEntity, error.message) : ServiceError.malformed(error.message)
        }
        if let contracts = settings.contracts,
            let unknown = contracts.first(where: { catalog.entity(named: $0) == nil && catalog.event(named: $0) == nil })
        {
            throw ServiceError(status: 400, .unknownEntity, "'\(unknown)' is not a contract of this server")
        }
        let (now, fromStart) = (clock.now().millisecondsSince1970, request.fromStart)
        let cursor = try await storage.read { reader in
            // From now: the entry after the last one written (every entry is some tenant's).
            fromStart
                ? ChangeFeed.Cursor(entry: (try await reader.auditHead()?.base?.lastID ?? 0) + 1, passed: 0)
                : ChangeFeed.Cursor(entry: (try await reader.auditHead()?.lastID ?? 0) + 1, passed: 0)
        }
        let sink = Sink(
            tenant: tenant, id: id, kind: kind.name, url: request.url, contracts: settings.contracts,
            secrets: Sink.Secrets(signing: request.secret, settings: settings.secrets), options: settings.values,
            createdAt: now, cursor: cursor, pending: nil, attempts: 0, nextAttemptAt: 0, lastError: nil, delivered: 0, deliveredAt: nil,
            leaseHolder: nil, leaseUntil: 0)
        if try await store.sink(tenant: tenant, id: id) != nil {
            throw ServiceError(status: 409, .sinkExists, "the tenant has a sink '\(id)' already")
        }
        // Two adds at once may both pass; the cap is then passed by one add per request in
        // flight at most, never without bound.
        if try await store.count(tenant: tenant) >= sinksPerTenant {
            throw ServiceError(
                status: 409, .limitReached, "the tenant holds \(sinksPerTenant) sinks, the most it may: remove one before adding another",
                details: .object(["limit": .int(Int64(sinksPerTenant))]))
        }
        do {
            try await store.add(sink)
        } catch {
            // Added in between by another request: the primary key refused the second.
            if try await store.sink(tenant: tenant, id: id) != nil {
                throw ServiceError(status: 409, .sinkExists, "the tenant has a sink '\(id)' already")
            }
            throw error
        }
        return sink
    }

    package func sinks(tenant: String) async throws -> [Sink] { try await store.sinks(tenant: tenant) }

    package func sink(tenant: String, id: String) async throws -> Sink {
        guard let sink = try await store.sink(tenant: tenant, id: id) else { throw ServiceError.notFound("the tenant has no sink '\(id)'") }
        return sink
    }

    package func remove(tenant: String, id: String) async throws {
        guard try await store.remove(tenant: tenant, id: id) else { throw ServiceError.notFound("the tenant has no sink '\(id)'") }
    }

    package func deadLetters(tenant: String, sinkID: String, after: Int64, limit: Int) async throws -> [DeadLetter] {
        _ = try await sink(tenant: tenant, id: sinkID)
        return try await store.deadLetters(tenant: tenant, sinkID: sinkID, after: after, limit: limit)
    }

    /// What a replay of one dead letter did.
    package struct Replay: Sendable {
        package var id: Int64
        package var outcome: SinkRequest.Outcome

        package var json: JSONValue {
            switch outcome {
            case .delivered(let status): .object(["id": .int(id), "delivered": .bool(true), "status": .int(Int64(status))])
            case .retry(let reason, _): .object(["id": .int(id), "delivered": .bool(false), "error": .string(reason)])
            case .refused(let status):
                .object([
                    "id": .int(id), "delivered": .bool(false), "status": .int(Int64(status)),
                    "response": .string(SinkRequest.category(status: status)),
                ])
            }
        }
    }

    /// Sends dead letters again, as they were sent (same body, same idempotency key, signed
    /// now), in order: `ids`, or every one, each within `timeout` (connecting, the answer's head
    /// and body), to an address ``outbound`` allows. A delivered letter is removed; one refused
    /// again keeps the new status; one that failed otherwise (5xx, timeout) stays as it was.
    package func replay(tenant: String, sinkID: String, ids: [Int64]?, timeout: Duration = .seconds(10)) async throws -> [Replay] {
        let sink = try await sink(tenant: tenant, id: sinkID)
        var letters: [DeadLetter] = []
        var after: Int64 = 0
        while true {
            let page = try await store.deadLetters(tenant: tenant, sinkID: sinkID, after: after, limit: 500)
            letters += page
            guard let last = page.last, page.count == 500 else { break }
            after = last.id
        }
        if let ids {
            let known = Set(letters.map(\.id))
            if let missing = ids.first(where: { !known.contains($0) }) {
                throw ServiceError.notFound("sink '\(sinkID)' has no dead letter \(missing)")
            }
            letters = letters.filter { ids.contains($0.id) }
        }
        guard !letters.isEmpty else { return [] }
        guard let kind = kinds.kind(named: sink.kind) else {
            throw ServiceError(status: 409, .sinkKindUnknown, "this server has no sink kind '\(sink.kind)' to send sink '\(sinkID)' with")
        }
        var replays: [Replay] = []
        for letter in letters {
            let request = SinkRequest(
                url: kind.destination(of: sink.url, settings: sink.settings),
                body: Array(letter.body.utf8), headers: Self.headers(of: sink, kind: kind, key: letter.idempotencyKey))
            let outcome = await request.send(policy: outbound, secret: sink.secrets.signing, timeout: timeout, now: clock.now().millisecondsSince1970)
            switch outcome {
            case .delivered: _ = try await store.removeDeadLetter(tenant: tenant, sinkID: sinkID, id: letter.id)
            case .refused(let status):
                try await store.refusedAgain(tenant: tenant, sinkID: sinkID, id: letter.id, status: status, at: clock.now().millisecondsSince1970)
            case .retry: break
            }
            replays.append(Replay(id: letter.id, outcome: outcome))
        }
        return replays
    }

    /// The headers of a sink's requests (the signature is added as each is sent): the engine's,
    /// then its kind's.
    static func headers(of sink: Sink, kind: any SinkKind, key: String) -> [(String, String)] {
        let headers = [
            ("Content-Type", "application/json"), ("Idempotency-Key", key), ("Outpost-Sink", sink.id), ("User-Agent", "outpost-sync-server"),
        ]
        return headers + kind.headers(of: sink.settings).map { ($0.name, $0.value) }
    }

    /// `text` as an http or https URL with a host, no credentials and a port from 1 to 65535.
    private static func httpURL(_ text: String, as name: String) throws(ServiceError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil
        else {
            throw ServiceError.malformed("\(name) must be an http or https URL without credentials in it, not '\(text)'")
        }
        if let port = url.port, !(1...65535).contains(port) {
            throw ServiceError.malformed("\(name) names port \(port): a port is from 1 to 65535")
        }
        // Foundation may drop a port it cannot read (`:99999`, `:-1`, `:8o`) rather than fail.
        let authority = text.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).dropFirst(2).first ?? ""
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            let digits = authority[authority.index(after: colon)...]
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let port = Int(digits), (1...65535).contains(port)
            else { throw ServiceError.malformed("\(name) names port '\(digits)': a port is from 1 to 65535") }
        }
        return url
    }

    /// A sink's URL: ``httpURL(_:as:)``, and a host that is not an address outbound requests
    /// may not reach (in any of its forms: `2130706433`, `0x7f000001`, `[::1]`, `localhost`).
    /// A name is checked at each connection, once resolved (``OutboundHTTP``).
    private func requireReachableURL(_ text: String, as name: String) throws(ServiceError) {
        let url = try Self.httpURL(text, as: name)
        var host = url.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let refusal = outbound.literalRefusal(host: host) {
            throw ServiceError.malformed(
                "refused_address: \(name) names \(host), \(refusal.rawValue): sinks may not reach loopback, link-local, private, shared, unspecified, multicast or reserved addresses unless the operator allows them (serve --outbound-allow)"
            )
        }
    }
}

import ContractRuntime
import Contracts
import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import Logging
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// A server on a real SQLite database in a temporary folder, driven in process through
/// HummingbirdTesting's `.router` client. The folder goes with the harness.
final class RouteHarness: Sendable {
    static let secret = Data(repeating: 7, count: 32)

    private let directory: TemporaryDirectory
    let storage: SQLiteStorage
    let signer: TokenSigner
    let metrics: ServerMetrics
    let configuration: ServerConfiguration
    let rateLimiter: RateLimiter?
    /// The apps the server runs: the sample's on the sample's contracts, none on the engines' own
    /// (``engine(configuration:rateLimiter:)``).
    let apps: [any ServerApp]

    /// The bearer token of `/metrics` in the default configuration.
    static let metricsToken = "metrics-token-for-the-route-tests"

    static var defaultConfiguration: ServerConfiguration {
        var configuration = ServerConfiguration(rateLimit: nil)
        configuration.metricsToken = metricsToken
        return configuration
    }

    /// `Authorization` for `/metrics`.
    var metricsHeaders: HTTPFields { [.authorization: "Bearer \(Self.metricsToken)"] }

    var folder: URL { directory.url }

    init(
        configuration: ServerConfiguration = RouteHarness.defaultConfiguration, rateLimiter: RateLimiter? = nil,
        contracts: any ContractSchema.Type = ContractRegistry.self, apps: [any ServerApp] = SampleServerApps.all
    ) throws {
        directory = try TemporaryDirectory(prefix: "sync-routes")
        storage = try SQLiteStorage(directory: directory.url, contracts: contracts)
        self.apps = apps
        signer = try TokenSigner(secret: Self.secret)
        metrics = ServerMetrics()
        self.configuration = configuration
        self.rateLimiter = rateLimiter
    }

    /// Runs `body` against the router; the server logs to `logger` (Hummingbird's default if nil).
    func test<Value: Sendable>(
        logger: Logger? = nil, _ body: @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        let environment = ServerEnvironment(
            storage: storage, signer: signer, metrics: metrics, rateLimiter: rateLimiter, apps: apps
        )
        return try await buildApplication(configuration: configuration, environment: environment, logger: logger).test(.router, body)
    }

    /// A token; its teams are also recorded as the user's memberships on the server (which
    /// authorizes team scopes by them, not by the token).
    func token(
        tenant: String = "acme", user: String = "u-1", device: String = "d-1", teams: [String] = ["team-1"], admin: Bool = false,
        expiresIn: Int64 = 3600
    ) -> String {
        if !teams.isEmpty, let queue = try? DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path) {
            for team in teams {
                try? queue.write { db in
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO team_members (tenant, team_id, user_id) VALUES (?, ?, ?)", arguments: [tenant, team, user])
                }
            }
        }
        return signer.token(tenant: tenant, user: user, device: device, teams: teams, isAdmin: admin, lifetime: expiresIn)
    }

    /// `Authorization: Bearer <token>` plus `extra`.
    func headers(_ token: String? = nil, _ extra: HTTPFields = [:]) -> HTTPFields {
        var headers = extra
        headers[.authorization] = "Bearer \(token ?? self.token())"
        return headers
    }

    /// Seeds the sample content into tenant `acme`, team `team-1`.
    func seed() async throws {
        _ = try await SampleContent.seed(storage: storage, tenant: "acme", team: "team-1", clock: SystemClock())
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var data: Data { Data(body.readableBytesView) }

    /// The `{"error": {...}}` body of an error response.
    func errorBody() throws -> ErrorDetail {
        try JSONDecoder().decode(ErrorBody.self, from: data).error
    }
}

extension ByteBuffer {
    init(json value: some Encodable) throws {
        self.init(bytes: try JSONEncoder().encode(value))
    }
}

/// Mutations of `AssessmentResponse` (user scope, last writer wins): rows a device may push.
enum SampleMutations {
    static func answer(seq: Int64, id: String = "9b2f3c1e-0000-4000-8000-000000000001", questionID: String = "q-1") -> Mutation {
        Mutation(
            seq: seq, clientMutationId: String(format: "01J00000000000000000000%03d", seq), entity: "AssessmentResponse", op: .create,
            id: id,
            payload: .object([
                "id": .string(id), "assessment_id": .string("assessment-1"), "attempt_id": .string("attempt-1"),
                "question_id": .string(questionID), "answer": .string("B"), "time_spent_ms": .int(1200),
                "flagged_for_review": .bool(false), "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ]),
            hlc: HybridLogicalClock(milliseconds: 1_769_846_400_000, counter: Int(seq), node: "d-1").description
        )
    }

    static func push(_ mutations: [Mutation], client: String = "client-1", schema: [String: Int] = ["AssessmentResponse": 1]) -> PushRequest {
        PushRequest(clientId: client, schema: schema, mutations: mutations)
    }
}

import ContractRuntime
import Foundation
import Hummingbird
import SyncProtocol

extension SyncRoutes {
    /// `POST /sync/v1/subscriptions/pull`: a page of each subscription the body names
    /// (``SubscriptionService``), the device's schema in `X-Outpost-Schema` as on a pull.
    @Sendable func subscriptionPull(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let json = try await request.jsonBody(limit: configuration.maximumBodyBytes, maximumDepth: configuration.maximumJSONDepth)
        let body: SubscriptionPullRequest
        do {
            body = try JSONTreeDecoder.decode(SubscriptionPullRequest.self, from: json)
        } catch {
            throw ServiceError.malformed(
                "the body must be {\"subscriptions\": [{\"id\", \"name\", \"parameters\", \"cursor\"?, \"scope\"?}], \"limit\"?}: \(error)")
        }
        let clientID = request.headers[.outpostClient]
        // The answer weighs about one pull page, and holds its room in the response budget while it is built.
        let lease = try await responseMemory.acquire(pullPageReservation)
        let response = try await subscriptionService.pull(body, schema: try RequestInput.schema(request), clientID: clientID, identity: identity)
        environment.metrics.recordPull(rows: response.subscriptions.reduce(0) { $0 + $1.rowCount })
        let answer = try Response.json(response, request: request, compressible: true)
        lease.release()
        return answer
    }
}

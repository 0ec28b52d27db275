import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers

/// A webhook receiver and learning record store on loopback, in the test's process: it records
/// every request and answers with the statuses its script gives, in order (200 once the
/// script is spent).
final class TestReceiver: Sendable {
    struct Received: Sendable {
        var path: String
        /// By lowercase name.
        var headers: [String: String]
        var body: Data
        /// What the receiver answered.
        var status: Int

        var json: Any? { try? JSONSerialization.jsonObject(with: body) }
        /// The changes of a webhook batch.
        var changes: [[String: Any]] { ((json as? [String: Any])?["changes"] as? [[String: Any]]) ?? [] }
    }

    private struct State {
        var received: [Received] = []
        var script: [(status: Int, retryAfter: String?)]
    }

    private let state: NIOLockedValueBox<State>
    /// How long each answer takes (a slow receiver).
    private let delay: Duration

    init(script: [(status: Int, retryAfter: String?)] = [], delay: Duration = .zero) {
        state = NIOLockedValueBox(State(script: script))
        self.delay = delay
    }

    var received: [Received] { state.withLockedValue { $0.received } }

    /// Every change acknowledged (2xx), in order of arrival.
    var acknowledgedChanges: [[String: Any]] { acknowledged.flatMap(\.changes) }

    /// The requests answered 2xx.
    var acknowledged: [Received] { received.filter { (200..<300).contains($0.status) } }

    func script(_ statuses: [(status: Int, retryAfter: String?)]) {
        state.withLockedValue { $0.script = statuses }
    }

    /// Serves while `body` runs, with the receiver's base URL (`http://127.0.0.1:PORT`).
    func run<Value: Sendable>(_ body: @Sendable (String) async throws -> Value) async throws -> Value {
        let router = Router()
        router.post("/hooks") { request, _ in try await self.answer(request, path: "/hooks") }
        router.post("/lrs/xAPI/statements") { request, _ in try await self.answer(request, path: "/lrs/xAPI/statements") }
        router.post("/hooks/lines") { request, _ in try await self.answer(request, path: "/hooks/lines") }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body("http://127.0.0.1:\(client.port!)") }
    }

    private func answer(_ request: Request, path: String) async throws -> Response {
        let bytes = try await request.body.collect(upTo: 1 << 24)
        if delay > .zero { try await Task.sleep(for: delay) }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        let (status, retryAfter) = state.withLockedValue { state -> (Int, String?) in
            let answer = state.script.isEmpty ? (200, nil) : state.script.removeFirst()
            state.received.append(Received(path: path, headers: headers, body: Data(buffer: bytes), status: answer.0))
            return answer
        }
        var fields: HTTPFields = [:]
        if let retryAfter { fields[.retryAfter] = retryAfter }
        return Response(
            status: HTTPResponse.Status(code: status), headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"status\":\(status)}")))
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import SyncServer

/// The server's log: every line written about a request carries the request's id, and every
/// answered request gets one `info` line with its route, status and duration.
@Suite("Request log")
struct RequestLogTests {
    @Test("every line about a request carries hb.request.id; one answered line per request, with route and status")
    func everyLineHasTheRequestID() async throws {
        let harness = try RouteHarness()
        let lines = CapturedLines()
        var logger = Logger(label: "outpost.test") { _ in CapturingLogHandler(lines: lines) }
        logger.logLevel = .trace
        let token = harness.token()
        try await harness.test(logger: logger) { client in
            _ = try await client.execute(uri: "/health", method: .get)
            _ = try await client.execute(uri: "/no/such/route", method: .get)
            _ = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get)
            _ = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers(token))
        }
        let captured = lines.all
        let answered = captured.filter { $0.message == "answered" }
        #expect(answered.map { $0.metadata["http.status"]?.description } == ["200", "404", "401", "200"])
        #expect(answered.map { $0.metadata["http.route"]?.description } == ["/health", "unmatched", "/sync/v1/pull", "/sync/v1/pull"])
        #expect(answered.allSatisfy { $0.level == .info && $0.metadata["duration_ms"] != nil })
        // Hummingbird's own request line (debug) for each of the four, and nothing without an id.
        #expect(captured.filter { $0.message == "Request" }.count == 4)
        // swift-service-lifecycle's lines about the services the application runs beside its
        // routes (the sinks' delivery) are about the process, not a request.
        let lifecycle = ["Graceful shutdown caught. Cascading shutdown to services", "Service lifecycle ended"]
        for line in captured where !line.metadata.keys.contains(where: { $0.hasPrefix("sl-") }) && !lifecycle.contains(line.message) {
            #expect(line.metadata["hb.request.id"] != nil, "no request id: \(line.message) \(line.metadata)")
        }
        // The ids tell the four requests apart, and the authenticated one names its device.
        #expect(Set(answered.compactMap { $0.metadata["hb.request.id"]?.description }).count == 4)
        let authenticated = captured.filter { $0.metadata["outpost.device"] != nil }
        #expect(!authenticated.isEmpty)
        #expect(
            authenticated.allSatisfy { $0.metadata["outpost.device"]?.description == "d-1" && $0.metadata["outpost.tenant"]?.description == "acme" })
    }
}

/// One log line as the handler saw it (the logger's metadata merged with the line's).
struct CapturedLine: Sendable {
    var level: Logger.Level
    var message: String
    var metadata: Logger.Metadata
}

final class CapturedLines: Sendable {
    private let box = NIOLockedValueBox<[CapturedLine]>([])
    func append(_ line: CapturedLine) { box.withLockedValue { $0.append(line) } }
    var all: [CapturedLine] { box.withLockedValue { $0 } }
}

struct CapturingLogHandler: LogHandler {
    let lines: CapturedLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append(CapturedLine(level: event.level, message: event.message.description, metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}

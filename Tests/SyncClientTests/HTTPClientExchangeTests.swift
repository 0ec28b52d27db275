import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClientNIO
import SyncProtocol
import Testing

@testable import SyncClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `HTTPClientExchange` (AsyncHTTPClient) under `URLSessionTransport`, against the real server
/// on loopback: what a device on Linux sends its requests through. The same requests answer the
/// same through it as through URLSession.
@Suite(.blockingWork) struct HTTPClientExchangeTests {
    static func transport(_ server: LiveServer, device: String, timeout: Duration = .seconds(30)) -> URLSessionTransport {
        URLSessionTransport(
            baseURL: server.url, timeout: 30, tokenProvider: ClosureTokenProvider { server.token(device) },
            exchange: HTTPClientExchange(timeout: timeout))
    }

    @Test("a sync through the exchange pushes and pulls as through URLSession; pages asked for with gzip are inflated; errors keep their codes")
    func syncs() async throws {
        try await LiveServer.engine { server in
            for label in EngineSamples.labels { try await server.publish("Label", try Self.object(label)) }
            let exchange = Self.transport(server, device: "d-1")
            #expect(await exchange.health())

            // The same page both ways; the one through the exchange asked for gzip and was inflated.
            let schema = ["Label": Label.descriptor.currentVersion]
            let throughExchange = try await exchange.pull(scope: "catalog", cursor: nil, limit: nil, schema: schema, clientID: "d-1")
            let throughSession = try await server.transport("d-2").pull(scope: "catalog", cursor: nil, limit: nil, schema: schema, clientID: "d-2")
            let page = try PullResponse(json: throughExchange)
            #expect(page.upserts["Label"]?.count == 2)
            #expect(try PullResponse(json: throughSession).upserts["Label"]?.count == 2)

            // A whole device on the exchange: its write pushed, the other device's pull sees it.
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            try store.create(EngineSamples.note("note-x", body: "Through NIO"))
            let engine = SyncEngine(
                store: store, transport: exchange,
                configuration: SyncEngineConfiguration(scopes: ["team", "catalog"], retriesAutomatically: false, usesLiveChannel: false)
            )
            guard case .succeeded(pushed: 1, let pulled) = await engine.syncNow() else {
                Issue.record("the sync through the exchange")
                return
            }
            #expect(pulled >= 2)
            #expect(try store.fetch(Label.self, id: "label-1")?.name == "Later")
            let other = try await server.transport("d-2").pull(
                scope: "team", cursor: nil, limit: nil, schema: ["Note": Note.descriptor.currentVersion], clientID: "d-2")
            #expect(String(decoding: other, as: UTF8.self).contains("Through NIO"))

            // An error answer keeps its status and stable code.
            do throws(TransportError) {
                _ = try await exchange.pull(scope: "nowhere", cursor: nil, limit: nil, schema: schema, clientID: "d-1")
                Issue.record("an unknown scope was answered")
            } catch {
                guard case .http(404, let body?, _) = error else {
                    Issue.record("not a 404 with its body: \(error)")
                    return
                }
                #expect(body.error.code == .notFound)
            }
            try store.close()
        }
    }

    @Test("the live channel streams through the exchange")
    func liveChannel() async throws {
        try await LiveServer.engine { server in
            let transport = Self.transport(server, device: "d-1")
            let events = try #require(try await transport.liveEvents())
            var iterator = events.makeAsyncIterator()
            let first = try await iterator.next()
            guard case .hello? = first else {
                Issue.record("the first event is not hello: \(String(describing: first))")
                return
            }
        }
    }

    @Test("a server that never answers is a network error once the timeout has passed")
    func timeout() async throws {
        // A listener that accepts and never answers.
        let listener = try SilentListener()
        defer { listener.close() }
        let transport = URLSessionTransport(
            baseURL: URL(string: "http://127.0.0.1:\(listener.port)")!, timeout: 30, tokenProvider: ClosureTokenProvider { "t" },
            exchange: HTTPClientExchange(timeout: .milliseconds(300)))
        let started = ContinuousClock.now
        do throws(TransportError) {
            _ = try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "d-1")
            Issue.record("a silent server answered")
        } catch {
            guard case .network = error else {
                Issue.record("not a network error: \(error)")
                return
            }
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    static func object<Value: Encodable>(_ value: Value) throws -> [String: JSONValue] {
        guard case .object(let object) = try JSONValue(encoding: value) else { throw CocoaError(.coderInvalidValue) }
        return object
    }
}

/// A TCP listener on loopback that accepts connections and never writes to them.
final class SilentListener: @unchecked Sendable {
    let socket: Int32
    let port: Int

    init() throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
        guard bound == 0, listen(descriptor, 8) == 0 else { throw CocoaError(.fileWriteUnknown) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        socket = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(socket) }
}

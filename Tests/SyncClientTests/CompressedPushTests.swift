import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Compressed pushes: `URLSessionTransport` gzips push bodies from its threshold, the real server
/// (on both storages) applies them as if they were plain, and a server that refuses the
/// encoding with 415 is sent the push again as is, and no compressed push after that.
@Suite("Compressed pushes", .serialized)
struct CompressedPushTests {
    /// The real sync server on `kind`, with the sample contracts, on loopback; `refusing` puts a
    /// front in between that answers 415 to any body with a `Content-Encoding` (a server or a
    /// proxy that does not read gzip) and passes everything else on.
    struct Server: Sendable {
        let url: URL
        let signer: TokenSigner
        let clock: any ServerClock
        let refusals: Counter

        /// A transport for `device` of user `u-1` (team `team-1`), its requests recorded by `recorder`.
        func transport(_ device: String, recorder: RecordingExchange, compressPushesFrom: Int? = 1024) -> URLSessionTransport {
            URLSessionTransport(
                baseURL: url, timeout: 120,
                tokenProvider: ClosureTokenProvider { [self] in
                    signer.token(tenant: "acme", user: "u-1", device: device, teams: ["team-1"], now: clock.now().millisecondsSince1970 / 1000)
                }, exchange: recorder, compressPushesFrom: compressPushesFrom)
        }

        static func run(_ kind: StorageKind, refusing: Bool = false, _ body: @Sendable (Server) async throws -> Void) async throws {
            try await LiveServer.engine(kind) { live in
                let refusals = Counter()
                guard refusing else {
                    try await body(Server(url: live.url, signer: live.signer, clock: live.clock, refusals: refusals))
                    return
                }
                let router = Router()
                router.add(middleware: RefusingFront(upstream: live.url, refusals: refusals))
                let front = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
                try await front.test(.live) { client in
                    let port = try #require(client.port)
                    try await body(Server(url: URL(string: "http://127.0.0.1:\(port)")!, signer: live.signer, clock: live.clock, refusals: refusals))
                }
            }
        }
    }

    /// A card with a realistic title and description (a member's write).
    static func card(_ index: Int) -> Card {
        Card(
            id: "card-\(index)", teamId: "team-1", boardId: "board-1", title: "Prepare the slides of review \(index) and share them with the team",
            description: "Check the figures and the charts; ask finance to read them before and after.", revision: 0)
    }

    static func engine(_ store: OfflineStore, _ transport: URLSessionTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], retriesAutomatically: false, usesLiveChannel: false))
    }

    @Test("pushes from the threshold go gzipped, the server applies them, another device pulls them intact", arguments: StorageKind.allCases)
    func compressedPushesApply(_ kind: StorageKind) async throws {
        try await Server.run(kind) { server in
            let phoneFolder = try TemporaryDirectory()
            let phone = try makeEngineDeviceStore(phoneFolder, device: "phone-1")
            let recorder = RecordingExchange()
            let transport = server.transport("phone-1", recorder: recorder)
            #expect(transport.compressesPushes)
            for index in 0..<40 { try phone.create(Self.card(index)) }
            guard case .succeeded(pushed: 40, _) = await Self.engine(phone, transport).syncNow() else {
                Issue.record("the phone's sync")
                return
            }
            let pushes = recorder.exchanges.filter { $0.path == "/sync/v1/push" }
            #expect(pushes.count == 1)
            for push in pushes {
                #expect(push.status == 200)
                #expect(push.contentEncoding == "gzip")
                // What went on the wire is gzip of the push, under half its JSON.
                let json = try Gzip.decompress(push.body, limit: 1 << 20)
                let request = try JSONDecoder().decode(PushRequest.self, from: json)
                #expect(request.mutations.count == 40)
                #expect(push.body.count * 2 < json.count, "\(push.body.count) bytes of gzip for \(json.count) of JSON")
            }
            #expect(transport.compressesPushes)

            // One small write is under the threshold: sent as is.
            try phone.patch(Card.self, id: "card-0", [.lane(.review)])
            guard case .succeeded(pushed: 1, _) = await Self.engine(phone, transport).syncNow() else {
                Issue.record("the phone's second sync")
                return
            }
            let small = try #require(recorder.exchanges.last { $0.path == "/sync/v1/push" })
            #expect(small.contentEncoding == nil)
            #expect(small.body.count < 1024)

            // Another device of the team pulls every card as the phone wrote it.
            let tabletFolder = try TemporaryDirectory()
            let tablet = try makeEngineDeviceStore(tabletFolder, device: "tablet-1")
            guard case .succeeded = await Self.engine(tablet, server.transport("tablet-1", recorder: RecordingExchange())).syncNow() else {
                Issue.record("the tablet's sync")
                return
            }
            let cards = try tablet.all(Card.self)
            #expect(cards.count == 40)
            #expect(cards.first { $0.id == "card-7" }?.title == Self.card(7).title)
            #expect(cards.first { $0.id == "card-0" }?.lane == .review)
            try phone.close()
            try tablet.close()
        }
    }

    @Test("an automatic sync's data budget counts a push as it went on the wire, gzipped", arguments: StorageKind.allCases)
    func dataBudgetCountsCompressedBytes(_ kind: StorageKind) async throws {
        try await Server.run(kind) { server in
            let folder = try TemporaryDirectory()
            let phone = try makeEngineDeviceStore(folder, device: "phone-1")
            let recorder = RecordingExchange()
            let engine = Self.engine(phone, server.transport("phone-1", recorder: recorder))
            try await engine.setPreferences(SyncPreferences(dailyAutomaticDataBudget: 10 << 20))
            for index in 0..<40 { try phone.create(Self.card(index)) }
            await engine.appDidBecomeActive()
            #expect(try phone.outboxCounts().unsent == 0)
            let push = try #require(recorder.exchanges.first { $0.path == "/sync/v1/push" })
            #expect(push.contentEncoding == "gzip")
            let json = try Gzip.decompress(push.body, limit: 1 << 20)
            // The push as sent and every pulled body as received, nothing else.
            let pulled = recorder.exchanges.filter { $0.path.hasPrefix("/sync/v1/pull") }.reduce(0) { $0 + $1.responseBytes }
            #expect(try phone.automaticDataUsage().bytes == push.body.count + pulled, "\(push.body.count) bytes sent for \(json.count) of JSON")
            await engine.stop()
            try phone.close()
        }
    }

    @Test(
        "a server that answers 415 gets the push again as is, and no compressed push after, even after the app restarts on the same store",
        arguments: StorageKind.allCases)
    func refusalIsRemembered(_ kind: StorageKind) async throws {
        try await Server.run(kind, refusing: true) { server in
            let folder = try TemporaryDirectory()
            let phone = try makeEngineDeviceStore(folder, device: "phone-1")
            let recorder = RecordingExchange()
            let transport = server.transport("phone-1", recorder: recorder)
            for index in 0..<40 { try phone.create(Self.card(index)) }

            // Through the transport itself, to see the bytes it says it sent.
            let request = try #require(try phone.nextPushRequest(limit: 100))
            let json = try JSONEncoder().encode(request)
            let sizes = Counter()
            let response = try await transport.push(request) { sizes.add($0) }
            #expect(response.results.map(\.status) == Array(repeating: .applied, count: 40))
            #expect(server.refusals.values == [1])
            let attempts = recorder.exchanges.filter { $0.path == "/sync/v1/push" }
            #expect(attempts.map(\.status) == [415, 200])
            #expect(attempts.map(\.contentEncoding) == ["gzip", nil])
            // Both bodies count: the refused compressed one and the plain one.
            #expect(sizes.values == [attempts[0].body.count, json.count])
            #expect(attempts[0].body.count < json.count / 2)
            #expect(!transport.compressesPushes)
            _ = try phone.applyPushResponse(response)

            // The next pushes, through the engine, go as is at once.
            for index in 40..<80 { try phone.create(Self.card(index)) }
            guard case .succeeded(pushed: 40, _) = await Self.engine(phone, transport).syncNow() else {
                Issue.record("the phone's sync")
                return
            }
            let later = recorder.exchanges.filter { $0.path == "/sync/v1/push" }.dropFirst(2)
            #expect(later.count == 1)
            #expect(later.allSatisfy { $0.contentEncoding == nil && $0.status == 200 })
            #expect(server.refusals.values == [1])

            #expect(try phone.pushCompressionRefused(), "the engine kept the refusal in the store")
            try phone.close()

            // The app restarts: the store reopened from its file, a new transport and engine. The
            // store remembers the refusal, so the new transport sends its pushes as they are at once.
            let reopened = try makeEngineDeviceStore(folder, device: "phone-1")
            let fresh = server.transport("phone-1", recorder: recorder)
            #expect(fresh.compressesPushes, "a new transport alone does not know")
            let engine = Self.engine(reopened, fresh)
            #expect(!fresh.compressesPushes && fresh.pushCompressionRefused)
            try reopened.patch(Card.self, id: "card-1", [.description(String(repeating: "Slides shared; figures checked. ", count: 40))])
            for index in 80..<120 { try reopened.create(Self.card(index)) }
            guard case .succeeded(pushed: 41, _) = await engine.syncNow() else {
                Issue.record("the phone's sync after a restart")
                return
            }
            #expect(server.refusals.values == [1], "no compressed push tried again after the restart")
            let afterRestart = recorder.exchanges.filter { $0.path == "/sync/v1/push" }.dropFirst(3)
            #expect(!afterRestart.isEmpty)
            #expect(afterRestart.allSatisfy { $0.contentEncoding == nil && $0.status == 200 })
            #expect(try reopened.all(Card.self).count == 120)
            #expect(try reopened.outboxCounts().unsent == 0)
            await engine.stop()
            try reopened.close()

            // Another device's store knows nothing of it: its transport tries gzip, and is refused.
            let otherFolder = try TemporaryDirectory()
            let tablet = try makeEngineDeviceStore(otherFolder, device: "tablet-1")
            let tabletTransport = server.transport("tablet-1", recorder: recorder)
            for index in 0..<40 { try tablet.create(Self.card(1_000 + index)) }
            guard case .succeeded(pushed: 40, _) = await Self.engine(tablet, tabletTransport).syncNow() else {
                Issue.record("the tablet's sync")
                return
            }
            #expect(server.refusals.values == [1, 1])
            #expect(try tablet.pushCompressionRefused())
            try tablet.close()
        }
    }

    @Test("what counts as a refusal of the encoding, and the threshold")
    func refusalsAndThreshold() throws {
        func error(_ status: Int, _ code: ErrorCode, _ message: String) -> TransportError {
            .http(status: status, body: ErrorBody(ErrorDetail(code: code, message: message)), retryAfter: nil)
        }
        #expect(URLSessionTransport.refusesCompressedBody(error(415, .unsupportedEncoding, "Content-Encoding `gzip` is not supported")))
        #expect(URLSessionTransport.refusesCompressedBody(.http(status: 415, body: nil, retryAfter: nil)))
        // A server from before 415.
        #expect(
            URLSessionTransport.refusesCompressedBody(
                error(400, .malformedRequest, "Content-Encoding `gzip` is not supported; send the body as is or gzip")))
        #expect(!URLSessionTransport.refusesCompressedBody(error(400, .malformedRequest, "the body is not valid JSON")))
        #expect(!URLSessionTransport.refusesCompressedBody(error(413, .payloadTooLarge, "over the limit")))
        #expect(!URLSessionTransport.refusesCompressedBody(.network("offline")))

        let url = URL(string: "http://127.0.0.1:9")!
        let json = Data(repeating: UInt8(ascii: "a"), count: 2048)
        let standard = URLSessionTransport(baseURL: url) { "token" }
        #expect(standard.pushCompressionThreshold == URLSessionTransport.defaultPushCompressionThreshold)
        #expect(try Gzip.decompress(try #require(standard.compressedPushBody(json)), limit: 4096) == json)
        #expect(standard.compressedPushBody(json.prefix(1023)) == nil)
        #expect(standard.compressedPushBody(json.prefix(1024)) != nil)
        let never = URLSessionTransport(baseURL: url, compressPushesFrom: nil) { "token" }
        #expect(!never.compressesPushes)
        #expect(never.compressedPushBody(json) == nil)
    }
}

/// Numbers told from several tasks, in order.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var told: [Int] = []

    func add(_ value: Int) { lock.withLock { told.append(value) } }
    var values: [Int] { lock.withLock { told } }
}

/// An exchange through a URLSession that records each request's path, encoding and body with the
/// status it got.
final class RecordingExchange: HTTPExchange, @unchecked Sendable {
    struct Exchange: Sendable {
        var path: String
        var contentEncoding: String?
        var body: Data
        var status: Int
        /// The answer's body as the transport got it (inflated when it came gzipped).
        var responseBytes: Int
    }

    private let lock = NSLock()
    private var recorded: [Exchange] = []
    private let session = URLSession(configuration: .ephemeral)

    var exchanges: [Exchange] { lock.withLock { recorded } }

    func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        let answer: (Data, URLResponse)
        do { answer = try await session.data(for: request) } catch { throw .network(String(describing: error)) }
        guard let http = answer.1 as? HTTPURLResponse else { throw .network("not HTTP") }
        let exchange = Exchange(
            path: request.url?.path ?? "", contentEncoding: request.value(forHTTPHeaderField: "Content-Encoding"), body: request.httpBody ?? Data(),
            status: http.statusCode, responseBytes: answer.0.count)
        lock.withLock { recorded.append(exchange) }
        return (answer.0, http)
    }
}

/// In front of a server: 415 `unsupported_encoding` to any body with a `Content-Encoding` (as a
/// server or proxy that reads no compressed body answers), everything else passed on.
struct RefusingFront: RouterMiddleware {
    typealias Context = BasicRequestContext
    let upstream: URL
    let refusals: Counter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let encoding = request.headers[.contentEncoding], encoding.lowercased() != "identity" {
            refusals.add(1)
            let body = #"{"error": {"code": "unsupported_encoding", "message": "Content-Encoding `\#(encoding)` is not supported"}}"#
            return Response(
                status: .unsupportedMediaType, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
        }
        var forwarded = URLRequest(url: URL(string: upstream.absoluteString + request.uri.description)!)
        forwarded.httpMethod = request.method.rawValue
        for field in request.headers where !["host", "content-length", "accept-encoding", "connection"].contains(field.name.canonicalName) {
            forwarded.addValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        let body = try await request.body.collect(upTo: 16 << 20)
        if body.readableBytes > 0 { forwarded.httpBody = Data(body.readableBytesView) }
        let (data, response) = try await URLSession.shared.data(for: forwarded)
        let http = try #require(response as? HTTPURLResponse)
        var headers: HTTPFields = [.contentType: http.value(forHTTPHeaderField: "Content-Type") ?? "application/json"]
        if let retryAfter = http.value(forHTTPHeaderField: "Retry-After") { headers[.retryAfter] = retryAfter }
        return Response(status: .init(code: http.statusCode), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// The engines' own contracts with receipts (``Receipt``), for a server: its table as the contract
/// compiler writes a user-scoped entity's.
enum FileContracts: ContractSchema {
    static let scopes = ContractRegistry.scopes
    static let entities = ContractRegistry.entities + [Receipt.entity]
    static let events = ContractRegistry.events
    static let entityTypes: [any ContractEntity.Type] = ContractRegistry.entityTypes + [Receipt.self]
    static let eventTypes = ContractRegistry.eventTypes
    static let clientMigrations = Receipt.catalog.clientMigrations
    static let serverMigrations =
        ContractRegistry.serverMigrations + [
            ContractMigration(
                identifier: "receipts.v1.create", contract: "Receipt", version: 1,
                statements: [
                    """
                    CREATE TABLE "receipts" (
                        "_tenant_id" TEXT NOT NULL,
                        "id" TEXT NOT NULL,
                        "title" TEXT NOT NULL,
                        "photo" TEXT,
                        "document" TEXT,
                        "_scope_key" TEXT NOT NULL,
                        "_seq" INTEGER NOT NULL,
                        "_version" INTEGER NOT NULL DEFAULT 1,
                        "_schema_version" INTEGER NOT NULL,
                        "_hlc" TEXT,
                        "_field_clocks" TEXT,
                        "_deleted" INTEGER NOT NULL DEFAULT 0,
                        "_updated_at" INTEGER NOT NULL,
                        "_updated_by" TEXT,
                        PRIMARY KEY ("_tenant_id", "id")
                    )
                    """,
                    #"CREATE INDEX "receipts_scope_seq_idx" ON "receipts" ("_tenant_id", "_scope_key", "_seq")"#,
                ],
                checksum: "test")
        ]
    static let serverPostgresMigrations =
        ContractRegistry.serverPostgresMigrations + [
            ContractMigration(
                identifier: "receipts.v1.create", contract: "Receipt", version: 1,
                statements: [
                    """
                    CREATE TABLE "receipts" (
                        "_tenant_id" TEXT NOT NULL,
                        "id" TEXT NOT NULL,
                        "title" TEXT NOT NULL,
                        "photo" TEXT,
                        "document" TEXT,
                        "_scope_key" TEXT NOT NULL,
                        "_seq" BIGINT NOT NULL,
                        "_version" BIGINT NOT NULL DEFAULT 1,
                        "_schema_version" BIGINT NOT NULL,
                        "_hlc" TEXT,
                        "_field_clocks" TEXT,
                        "_deleted" BOOLEAN NOT NULL DEFAULT false,
                        "_updated_at" TIMESTAMPTZ NOT NULL,
                        "_updated_by" TEXT,
                        PRIMARY KEY ("_tenant_id", "id")
                    )
                    """,
                    #"CREATE INDEX "receipts_scope_seq_idx" ON "receipts" ("_tenant_id", "_scope_key", "_seq")"#,
                ],
                checksum: "test")
        ]
    static let subscriptions = ContractRegistry.subscriptions
}

/// Forwards to a real transport, failing once each `PATCH` from a listed offset with a lost
/// connection (and each `GET` from an offset listed in ``failingGets``), and recording the file
/// requests. A download's ranges go through URLSession's download tasks into files, as the
/// engine asks for them.
final class FlakyFileTransport: SyncTransport, @unchecked Sendable {
    let inner: URLSessionTransport
    private let lock = NSLock()
    private var failing: Set<Int64>
    private var failingGetOffsets: Set<Int64> = []
    private var calls: [String] = []

    /// The ranges from these offsets fail once each, after the server answered, with their bytes received.
    var failingGets: Set<Int64> {
        get { lock.withLock { failingGetOffsets } }
        set { lock.withLock { failingGetOffsets = newValue } }
    }

    init(_ inner: URLSessionTransport, failingAt offsets: Set<Int64> = []) {
        self.inner = inner
        failing = offsets
    }

    private func note(_ call: String) {
        lock.withLock { calls.append(call) }
    }

    var recorded: [String] { lock.withLock { calls } }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        note("push")
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { await inner.health() }

    func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        note("POST")
        return try await inner.startFileUpload(request)
    }

    func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64 {
        note("HEAD")
        return try await inner.fileUploadOffset(uploadID: uploadID)
    }

    func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer {
        note("PATCH \(offset)+\(bytes.count)")
        if lock.withLock({ failing.remove(offset) != nil }) { throw .network("the connection was lost") }
        return try await inner.sendFileBytes(bytes, uploadID: uploadID, offset: offset)
    }

    func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        note("GET \(range.lowerBound)-\(range.upperBound)")
        return try await inner.fileBytes(sha256: sha256, range: range)
    }

    func fileBytes(sha256: String, range: ClosedRange<Int64>, into destination: URL) async throws(TransportError) -> ReceivedFileBytes {
        note("GET \(range.lowerBound)-\(range.upperBound)")
        let received = try await inner.fileBytes(sha256: sha256, range: range, into: destination)
        if lock.withLock({ failingGetOffsets.remove(range.lowerBound) != nil }) {
            // As a transport must: nothing left at the destination when it throws.
            try? FileManager.default.removeItem(at: destination)
            throw .network("the connection was lost")
        }
        return received
    }
}

/// The real server on PostgreSQL (the throwaway cluster of `scripts/with-postgres.sh`), with the
/// receipt contracts, on loopback.
enum PostgresFileServer {
    static func run(_ body: @Sendable (@escaping @Sendable (String) -> URLSessionTransport) async throws -> Void) async throws {
        let folder = try TemporaryDirectory(prefix: "pg-files")
        let storage: PostgresStorage
        do {
            storage = try await PostgresStorage(configuration: StorageKind.postgresConfiguration(), contracts: FileContracts.self)
        } catch {
            // PSQLError hides its details from `description`.
            throw PostgresOpeningError(details: String(reflecting: error))
        }
        let signer = try TokenSigner(secret: LiveServer.secret)
        let clock = SyncServer.SystemClock()
        let environment = ServerEnvironment(
            storage: storage, signer: signer, clock: clock, apps: [])
        try await LoopbackServer.run(configuration: ServerConfiguration(port: 0, rateLimit: nil), environment: environment) { server in
            let url = server.url
            try await body { device in
                URLSessionTransport(baseURL: url, timeout: 120) {
                    signer.token(tenant: "acme", user: "u-1", device: device, teams: ["team-1"], now: clock.now().millisecondsSince1970 / 1000)
                }
            }
        }
        withExtendedLifetime(folder) {}
    }
}

struct PostgresOpeningError: Error, CustomStringConvertible {
    var details: String
    var description: String { details }
}

/// Files end to end: two devices of one user and the real server on loopback, over
/// `URLSessionTransport`.
@Suite("Files: end to end against the server", .serialized)
struct FileEndToEndTests {
    private func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        var configuration = SyncEngineConfiguration(scopes: ["user"], retriesAutomatically: false, usesLiveChannel: false)
        configuration.fileChunkBytes = 1 << 20
        return SyncEngine(store: store, transport: transport, configuration: configuration)
    }

    @Test(
        "a receipt's files go up in chunks before the receipt, resuming after a lost connection; another device downloads and checks them")
    func uploadThenDownload() async throws {
        try await LiveServer.run(contracts: FileContracts.self, apps: []) { server in
            try await receiptRoundTrip { server.transport($0) }
        }
    }

    @Test(
        "the same, against the server on PostgreSQL")
    func uploadThenDownloadOnPostgres() async throws {
        try await PostgresFileServer.run { transport in try await receiptRoundTrip(transport) }
    }

    /// A receipt with two files made on a phone whose connection drops mid-upload, restarted,
    /// synced; read on a tablet; the same bytes written again there.
    private func receiptRoundTrip(_ transport: @Sendable (String) -> URLSessionTransport) async throws {
        let phone = try FileTestStore(clock: ManualClock(Date()))
        let bytes = typed(sampleBytes(2_500_000, seed: 3), as: "application/pdf")
        let document = try phone.store.importFile(bytes, contentType: "application/pdf", name: "scan.pdf")
        let photo = try phone.store.importFile(
            typed(sampleBytes(900, seed: 4), as: "image/jpeg"), contentType: "image/jpeg", for: FileField(contract: "Receipt", field: "photo"))
        try phone.store.create(Receipt(id: "r-1", title: "Hotel", photo: photo, document: document))

        // The connection drops on the document's second chunk: the write stays queued.
        let flaky = FlakyFileTransport(transport("phone-1"), failingAt: [1 << 20])
        let first = await engine(phone.store, flaky).syncNow()
        guard case .failed(.network, _) = first else {
            Issue.record("expected a lost connection, got \(first)")
            return
        }
        #expect(try phone.store.outboxCounts().unsent == 1)
        let halfway = try #require(try phone.store.storedFile(sha256: document.sha256))
        #expect(halfway.acknowledgedOffset == 1 << 20)
        #expect(halfway.uploadID != nil)

        // The app is restarted: the upload resumes where the server stands, then the receipt goes.
        let restarted = try phone.reopen()
        let resumed = FlakyFileTransport(transport("phone-1"))
        let second = await engine(restarted.store, resumed).syncNow()
        guard case .succeeded(let pushed, _) = second else {
            Issue.record("expected a success, got \(second)")
            return
        }
        #expect(pushed == 1)
        #expect(resumed.recorded.first == "HEAD")
        #expect(resumed.recorded.contains("PATCH \(1 << 20)+\(1 << 20)"))
        #expect(!resumed.recorded.contains { $0.hasPrefix("PATCH 0+") && $0 != "PATCH 0+900" })
        #expect(resumed.recorded.last == "push")
        #expect(try restarted.store.storedFile(sha256: document.sha256)?.state == .uploaded)
        #expect(try restarted.store.storedFile(sha256: photo.sha256)?.state == .uploaded)

        // Another device of the same user pulls the receipt and asks for its files.
        let tablet = try FileTestStore(clock: ManualClock(Date()))
        let tabletTransport = FlakyFileTransport(transport("tablet-1"))
        let tabletEngine = engine(tablet.store, tabletTransport)
        guard case .succeeded = await tabletEngine.syncNow() else {
            Issue.record("the tablet's sync failed")
            return
        }
        let receipt = try #require(try tablet.store.fetch(Receipt.self, id: "r-1"))
        #expect(receipt.document == document)
        let url = try await tabletEngine.file(for: try #require(receipt.document))
        #expect(try Data(contentsOf: url) == bytes)
        // Ranges double from the chunk's size: 1 MiB, then the 1.4 MB left (at most 2 MiB).
        #expect(tabletTransport.recorded.filter { $0.hasPrefix("GET") } == ["GET 0-1048575", "GET 1048576-2499999"])
        #expect(try tablet.store.storedFile(sha256: document.sha256)?.state == .cached)
        #expect(try await tabletEngine.file(for: document) == url)
        #expect(tabletTransport.recorded.filter { $0.hasPrefix("GET") }.count == 2)

        // The same bytes written again on the tablet: the server holds them, nothing is sent.
        let again = try tablet.store.importFile(bytes, contentType: "application/pdf")
        try tablet.store.create(Receipt(id: "r-2", title: "Hotel, copy", document: again))
        guard case .succeeded(let copies, _) = await tabletEngine.syncNow() else {
            Issue.record("the tablet's second sync failed")
            return
        }
        #expect(copies == 1)
        #expect(!tabletTransport.recorded.contains { $0.hasPrefix("PATCH") })
    }

    @Test(
        "the file routes over URLSession: an upload cut short resumes at the server's offset, the same bytes again are stored, the uploader reads them back by ranges"
    )
    func routesOverURLSession() async throws {
        try await LiveServer.engine { server in
            let phone = try FileTestStore(clock: ManualClock(Date()))
            let bytes = typed(sampleBytes(2_500_000, seed: 5), as: "application/pdf")
            let document = try phone.store.importFile(bytes, contentType: "application/pdf")
            try phone.store.create(Receipt(id: "r-1", title: "Train", document: document))
            let flaky = FlakyFileTransport(server.transport("phone-1"), failingAt: [1 << 20])
            let waiting = try #require(try phone.store.storedFile(sha256: document.sha256))
            await #expect(throws: EngineFailure.self) {
                try await FileTransfers.upload(
                    waiting, store: phone.store, transport: flaky, chunkBytes: 1 << 20, mayStillSend: { _ in true }, traffic: nil, progress: { _ in })
            }
            let halfway = try #require(try phone.store.storedFile(sha256: document.sha256))
            #expect(halfway.acknowledgedOffset == 1 << 20)
            #expect(flaky.recorded == ["POST", "PATCH 0+1048576", "PATCH 1048576+1048576"])

            let outcome = try await FileTransfers.upload(
                halfway, store: phone.store, transport: flaky, chunkBytes: 1 << 20, mayStillSend: { _ in true }, traffic: nil, progress: { _ in })
            #expect(outcome == .uploaded)
            #expect(flaky.recorded.suffix(3) == ["HEAD", "PATCH 1048576+1048576", "PATCH 2097152+402848"])
            #expect(try phone.store.storedFile(sha256: document.sha256)?.state == .uploaded)

            // The same bytes declared again: the server holds them.
            let answer = try await flaky.inner.startFileUpload(FileUploadRequest(document))
            #expect(answer.state == .stored)

            // Read back by ranges into another store of the same device.
            let other = try FileTestStore(clock: ManualClock(Date()))
            var configuration = SyncEngineConfiguration(scopes: [], usesLiveChannel: false)
            configuration.fileChunkBytes = 1 << 20
            let engine = SyncEngine(store: other.store, transport: flaky, configuration: configuration)
            // The second range is lost on its way: the first stays, and the next call resumes
            // from it with ranges from the chunk's size again.
            flaky.failingGets = [1 << 20]
            await #expect(throws: FileDownloadError.transport(.network("the connection was lost"))) { try await engine.file(for: document) }
            #expect(other.store.partialFileSize(sha256: document.sha256) == 1 << 20)
            let url = try await engine.file(for: document)
            #expect(try Data(contentsOf: url) == bytes)
            #expect(
                flaky.recorded.suffix(4) == ["GET 0-1048575", "GET 1048576-2499999", "GET 1048576-2097151", "GET 2097152-2499999"])
            // Nothing of the ranges is left in the staging folder.
            let staging = other.store.filesDirectory.appendingPathComponent("staging").path
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []).isEmpty)
        }
    }

    @Test("a file the server lacks cannot be read: 404 as a typed error")
    func missingFile() async throws {
        try await LiveServer.engine { server in
            let phone = try FileTestStore(clock: ManualClock(Date()))
            let reference = try FileReference(sha256: String(repeating: "b", count: 64), byteCount: 10, contentType: "image/png")
            let error = await #expect(throws: FileDownloadError.self) {
                try await engine(phone.store, server.transport("phone-1")).file(for: reference)
            }
            guard case .transport(let transportError)? = error else {
                Issue.record("expected a transport error, got \(String(describing: error))")
                return
            }
            #expect(transportError.status == 404)
            #expect(try phone.store.storedFiles().isEmpty)
        }
    }
}

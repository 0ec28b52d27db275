import ContractRuntime
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// Uploads and downloads against the file routes of an in-memory server (``FakeFileTransport``):
/// the upload's state machine resuming from the offset the store recorded, the engine pushing a
/// write only once its files are on the server, downloads resumed with a range and checked.
@Suite("Files: uploads and downloads")
struct FileTransferTests {
    /// A receipt naming an imported file of `size` bytes, written to the store.
    private func writeReceipt(_ store: OfflineStore, size: Int, seed: Int = 1) throws -> (FileReference, Data) {
        let bytes = typed(sampleBytes(size, seed: seed), as: "application/pdf")
        let document = try store.importFile(bytes, contentType: "application/pdf", name: "scan.pdf")
        try store.create(Receipt(id: "r-\(seed)", title: "Receipt \(seed)", document: document))
        return (document, bytes)
    }

    private func upload(_ reference: FileReference, store: OfflineStore, transport: FakeFileTransport, chunk: Int = 1_000) async throws
        -> FileTransfers.UploadOutcome
    {
        let file = try #require(try store.storedFile(sha256: reference.sha256))
        return try await FileTransfers.upload(
            file, store: store, transport: transport, chunkBytes: chunk, mayStillSend: { _ in true }, traffic: nil, progress: { _ in })
    }

    @Test("a file goes up in chunks from offset 0; the server's acknowledged offset is recorded after each")
    func uploadInChunks() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 2_500)
        let server = FakeFileTransport()
        #expect(try await upload(document, store: device.store, transport: server) == .uploaded)
        #expect(server.calls == ["POST", "PATCH u1 0+1000", "PATCH u1 1000+1000", "PATCH u1 2000+500"])
        #expect(server.files[document.sha256] == bytes)
        let record = try #require(try device.store.storedFile(sha256: document.sha256))
        #expect(record.state == .uploaded)
        #expect(record.uploadID == nil)
    }

    @Test("a connection lost mid-upload, then a restart: the upload resumes from the offset the server holds (HEAD), not from 0")
    func resumeAfterLostConnection() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 3_500)
        let server = FakeFileTransport()
        server.locked { server.failPatches = [3] }
        await #expect(throws: EngineFailure.self) { try await upload(document, store: device.store, transport: server) }
        var record = try #require(try device.store.storedFile(sha256: document.sha256))
        #expect(record.state == .waitingToUpload)
        #expect(record.uploadID == "u1")
        #expect(record.acknowledgedOffset == 2_000)

        // The app is killed and started again: the table still says where the upload stands.
        let restarted = try device.reopen()
        record = try #require(try restarted.store.storedFile(sha256: document.sha256))
        #expect(record.acknowledgedOffset == 2_000)
        #expect(try await upload(document, store: restarted.store, transport: server) == .uploaded)
        #expect(
            server.calls == [
                "POST", "PATCH u1 0+1000", "PATCH u1 1000+1000", "PATCH u1 2000+1000", "HEAD u1", "PATCH u1 2000+1000", "PATCH u1 3000+500",
            ])
        #expect(server.files[document.sha256] == bytes)
    }

    @Test("the server holds more than the device recorded (an answer lost): HEAD's offset wins; a 409 offset_mismatch moves to the server's")
    func serverAheadOfRecord() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 2_500)
        let server = FakeFileTransport()
        server.seedUpload(id: "u9", of: bytes, holding: 1_500)
        // The device recorded 1 000 before its answer was lost.
        try device.store.recordUploadProgress(sha256: document.sha256, uploadID: "u9", offset: 1_000)
        #expect(try await upload(document, store: device.store, transport: server) == .uploaded)
        #expect(server.calls == ["HEAD u9", "PATCH u9 1500+1000"])

        // HEAD answers behind (another request landed meanwhile): the PATCH's 409 says where to go on.
        let (other, otherBytes) = try writeReceipt(device.store, size: 2_000, seed: 2)
        server.seedUpload(id: "u8", of: otherBytes, holding: 1_200)
        server.locked { server.headLag = 200 }
        try device.store.recordUploadProgress(sha256: other.sha256, uploadID: "u8", offset: 1_000)
        #expect(try await upload(other, store: device.store, transport: server) == .uploaded)
        #expect(server.calls.suffix(3) == ["HEAD u8", "PATCH u8 1000+1000", "PATCH u8 1200+800"])
        #expect(server.files[other.sha256] == otherBytes)
    }

    @Test("an upload the server lost is started again; a file the server holds is not sent (stored: dedup)")
    func lostUploadAndDedup() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 1_500)
        let server = FakeFileTransport()
        try device.store.recordUploadProgress(sha256: document.sha256, uploadID: "gone", offset: 700)
        #expect(try await upload(document, store: device.store, transport: server) == .uploaded)
        #expect(server.calls == ["HEAD gone", "POST", "PATCH u1 0+1000", "PATCH u1 1000+500"])
        #expect(server.files[document.sha256] == bytes)

        let (again, _) = try writeReceipt(device.store, size: 900, seed: 5)
        server.storeFile(typed(sampleBytes(900, seed: 5), as: "application/pdf"))
        #expect(try await upload(again, store: device.store, transport: server) == .uploaded)
        #expect(server.calls.suffix(1) == ["POST"])
        #expect(try device.store.storedFile(sha256: again.sha256)?.state == .uploaded)
    }

    @Test("the engine uploads a write's files before it pushes the write, with the bytes in its status; a lost upload keeps the write queued")
    func engineUploadsBeforePush() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 2_500)
        let server = FakeFileTransport()
        server.locked { server.failPatches = [2] }
        var configuration = SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false)
        configuration.fileChunkBytes = 1_000
        let engine = SyncEngine(store: device.store, transport: server, configuration: configuration)

        let failed = await engine.syncNow()
        guard case .failed(.network, _) = failed else { Issue.record("expected a network failure, got \(failed)"); return }
        #expect(server.calls == ["POST", "PATCH u1 0+1000", "PATCH u1 1000+1000"])
        #expect(try device.store.outboxCounts().unsent == 1)

        let stream = await engine.status
        let statuses = Task { () -> [SyncProgress] in
            var seen: [SyncProgress] = []
            for await status in stream {
                seen.append(status.progress)
                if status.pending == 0 { break }
            }
            return seen
        }
        let result = await engine.syncNow()
        guard case .succeeded(let pushed, _) = result else { Issue.record("expected a success, got \(result)"); return }
        #expect(pushed == 1)
        #expect(server.calls.suffix(4) == ["HEAD u1", "PATCH u1 1000+1000", "PATCH u1 2000+500", "push 1"])
        #expect(server.files[document.sha256] == bytes)
        guard case .object(let pushedRow)? = server.pushed.first?.payload else { Issue.record("nothing pushed"); return }
        #expect(pushedRow["document"] == document.json)
        let progress = await statuses.value
        #expect(progress.contains { $0.fileBytesTotal == 1_500 && $0.fileBytesSent == 1_500 })
    }

    @Test("an automatic sync stops uploading when the day's data budget is used: the upload keeps its offset, the write stays queued")
    func dataBudgetStopsUploads() async throws {
        let device = try FileTestStore()
        let (document, _) = try writeReceipt(device.store, size: 2_500)
        let server = FakeFileTransport()
        var configuration = SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false)
        configuration.fileChunkBytes = 1_000
        let engine = SyncEngine(store: device.store, transport: server, configuration: configuration)
        try await engine.setPreferences(SyncPreferences(dailyAutomaticDataBudget: 1_500))
        await engine.appDidBecomeActive()
        #expect(server.calls == ["POST", "PATCH u1 0+1000"])
        #expect(try device.store.storedFile(sha256: document.sha256)?.acknowledgedOffset == 1_000)
        #expect(try device.store.outboxCounts().unsent == 1)
        // The user asks: not counted, so it all goes.
        guard case .succeeded(let pushed, _) = await engine.syncNow() else {
            Issue.record("the manual sync failed")
            return
        }
        #expect(pushed == 1)
        #expect(server.calls.suffix(4) == ["HEAD u1", "PATCH u1 1000+1000", "PATCH u1 2000+500", "push 1"])
    }

    @Test("a push answered file_missing (the server lost a file the device thought uploaded): the file is declared again, then the write goes")
    func fileMissingDeclaresAgain() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 1_500)
        try device.store.recordUploaded(sha256: document.sha256)
        let server = FakeFileTransport()
        var configuration = SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false)
        configuration.fileChunkBytes = 1_000
        let engine = SyncEngine(store: device.store, transport: server, configuration: configuration)
        guard case .succeeded(let pushed, _) = await engine.syncNow() else {
            Issue.record("the sync failed")
            return
        }
        #expect(pushed == 1)
        #expect(server.calls == ["push 1", "POST", "PATCH u1 0+1000", "PATCH u1 1000+500", "push 1"])
        #expect(server.files[document.sha256] == bytes)
        #expect(try device.store.storedFile(sha256: document.sha256)?.state == .uploaded)
    }

    @Test("a file the server refuses (quota) fails the writes that name it, with the reason; nothing of them is pushed")
    func refusedFileFailsItsWrite() async throws {
        let device = try FileTestStore()
        let (document, _) = try writeReceipt(device.store, size: 500)
        let quota = QuotaTransport()
        let engine = SyncEngine(
            store: device.store, transport: quota,
            configuration: SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false))
        let result = await engine.syncNow()
        #expect(result == .succeeded(pushed: 0, pulled: 0))
        #expect(quota.pushes.withLock { $0 } == 0)
        let entries = try device.store.outboxEntries()
        #expect(entries.map(\.status) == [.failed])
        #expect(entries.first?.lastError?.code == .quotaExceeded)
        #expect(try device.store.storedFile(sha256: document.sha256)?.lastError?.code == .quotaExceeded)
        #expect(try device.store.storedFile(sha256: document.sha256)?.state == .waitingToUpload, "kept for a retry")
    }

    @Test(
        "a refused file never holds up the writes after it: they are pushed; its own write fails, is not sent again, and a retry sends it once the file is right"
    )
    func refusedFileDoesNotBlockTheOutbox() async throws {
        let device = try FileTestStore()
        let (document, bytes) = try writeReceipt(device.store, size: 1_500, seed: 1)
        try device.store.create(Receipt(id: "r-2", title: "No file", document: nil))
        // The store's copy is damaged after the import: the server's hash check refuses it.
        let stored = device.store.fileURL(sha256: document.sha256)
        var damaged = bytes
        damaged[damaged.count - 1] ^= 0xFF
        try damaged.write(to: stored)
        let server = FakeFileTransport()
        var configuration = SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false)
        configuration.fileChunkBytes = 1_000
        let engine = SyncEngine(store: device.store, transport: server, configuration: configuration)

        #expect(await engine.syncNow() == .succeeded(pushed: 1, pulled: 0))
        #expect(server.pushed.map(\.id) == ["r-2"])
        #expect(server.pushed.first?.seq == 1, "the refused write's wire seq was given back: no gap")
        #expect(server.files[document.sha256] == nil)
        let failed = try #require(try device.store.outboxEntries(statuses: [.failed]).first)
        #expect(failed.rowId == "r-1")
        #expect(failed.lastError?.code == .hashMismatch)
        #expect(try device.store.outboxCounts().unsent == 0)

        // The next sync does not send the refused file again.
        let calls = server.calls.count
        #expect(await engine.syncNow() == .succeeded(pushed: 0, pulled: 0))
        #expect(!server.calls[calls...].contains { $0.hasPrefix("PATCH") || $0 == "POST" })

        // The copy repaired, the write retried: the file goes up, then the write.
        try bytes.write(to: stored)
        try device.store.retryFailed(seq: failed.seq)
        #expect(await engine.syncNow() == .succeeded(pushed: 1, pulled: 0))
        #expect(server.pushed.map(\.id) == ["r-2", "r-1"])
        #expect(server.pushed.last?.seq == 2)
        #expect(server.files[document.sha256] == bytes)
        #expect(try device.store.storedFile(sha256: document.sha256)?.state == .uploaded)
    }

    @Test(
        "a file no queued write names any more (its refused write discarded) is not uploaded, its upload under way is given up, and it becomes evictable"
    )
    func unneededFileIsReleased() async throws {
        let device = try FileTestStore()
        let (document, _) = try writeReceipt(device.store, size: 500)
        try device.store.create(Receipt(id: "r-2", title: "Kept", document: document))
        let quota = QuotaTransport()
        let refusing = SyncEngine(
            store: device.store, transport: quota,
            configuration: SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false))
        _ = await refusing.syncNow()
        let failed = try device.store.outboxEntries(statuses: [.failed])
        #expect(failed.map(\.rowId) == ["r-1", "r-2"])
        // One write discarded: the other still names the file, which stays waiting.
        try device.store.discardFailed(seq: failed[0].seq)
        #expect(try device.store.releaseUnneededFiles() == [])
        #expect(try device.store.storedFile(sha256: document.sha256)?.state == .waitingToUpload)
        // Both discarded, with an upload under way on the server.
        try device.store.discardFailed(seq: failed[1].seq)
        try device.store.recordUploadProgress(sha256: document.sha256, uploadID: "u9", offset: 100)
        let server = FakeFileTransport()
        server.seedUpload(id: "u9", of: sampleBytes(500, seed: 1), holding: 100)
        let engine = SyncEngine(
            store: device.store, transport: server,
            configuration: SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false))
        #expect(await engine.syncNow() == .succeeded(pushed: 0, pulled: 0))
        #expect(server.calls == ["DELETE u9"])
        #expect(server.uploads.isEmpty)
        let file = try #require(try device.store.storedFile(sha256: document.sha256))
        #expect(file.state == .cached && file.uploadID == nil && file.lastError == nil)
        #expect(try device.store.filesWaitingToUpload().isEmpty)
    }

    @Test("a download cut short resumes with a range from the bytes it kept; the file is checked, cached and then answered at once")
    func resumableDownload() async throws {
        let device = try FileTestStore()
        let bytes = sampleBytes(2_500, seed: 4)
        let reference = try FileReference(sha256: sha256Hex(bytes), byteCount: 2_500, contentType: "image/x-test")
        let server = FakeFileTransport()
        server.storeFile(bytes)
        server.locked { server.failGets = [2] }
        var configuration = SyncEngineConfiguration(scopes: [], usesLiveChannel: false)
        configuration.fileChunkBytes = 1_000
        let engine = SyncEngine(store: device.store, transport: server, configuration: configuration)

        await #expect(throws: FileDownloadError.transport(.network("the connection was lost"))) { try await engine.file(for: reference) }
        #expect(device.store.partialFileSize(sha256: reference.sha256) == 1_000)
        let url = try await engine.file(for: reference)
        #expect(try Data(contentsOf: url) == bytes)
        #expect(
            server.calls == [
                // Ranges double from the chunk's size, and start from it again after a cut.
                "GET \(reference.sha256.prefix(8)) 0-999", "GET \(reference.sha256.prefix(8)) 1000-2499",
                "GET \(reference.sha256.prefix(8)) 1000-1999", "GET \(reference.sha256.prefix(8)) 2000-2499",
            ])
        #expect(try device.store.storedFile(sha256: reference.sha256)?.state == .cached)
        #expect(device.store.partialFileSize(sha256: reference.sha256) == 0)
        // From the device now: no request.
        #expect(try await engine.file(for: reference) == url)
        #expect(server.calls.count == 4)
    }

    @Test("downloaded bytes that do not match the reference's SHA-256 are deleted and the error is typed")
    func downloadHashMismatch() async throws {
        let device = try FileTestStore()
        let bytes = sampleBytes(1_200, seed: 6)
        let reference = try FileReference(sha256: sha256Hex(bytes), byteCount: 1_200, contentType: "image/x-test")
        let server = FakeFileTransport()
        let wrong = sampleBytes(1_200, seed: 7)
        server.locked { server.corrupt[reference.sha256] = wrong }
        let engine = SyncEngine(store: device.store, transport: server, configuration: SyncEngineConfiguration(scopes: [], usesLiveChannel: false))
        await #expect(throws: FileDownloadError.hashMismatch(expected: reference.sha256, received: sha256Hex(wrong))) {
            try await engine.file(for: reference)
        }
        #expect(device.store.partialFileSize(sha256: reference.sha256) == 0)
        #expect(try device.store.storedFiles().isEmpty)
        #expect(device.filesOnDisk() == [])
        // Not found on the server: the transport's 404.
        let missing = try FileReference(sha256: String(repeating: "a", count: 64), byteCount: 10, contentType: "image/x-test")
        await #expect(throws: FileDownloadError.transport(.http(status: 404, body: nil, retryAfter: nil))) { try await engine.file(for: missing) }
    }

    @Test("a transport without the file routes refuses them with files_unsupported, which is not worth retrying")
    func transportWithoutFiles() async throws {
        let transport = QuotaTransport.Bare()
        await #expect(throws: TransportError.filesUnsupported) { try await transport.fileUploadOffset(uploadID: "u1") }
        #expect(!FileTransfers.isWorthRetrying(.filesUnsupported))
        #expect(FileTransfers.isWorthRetrying(.network("lost")))
    }
}

/// A server whose file quota is used up: every upload is refused with 413 `quota_exceeded`.
final class QuotaTransport: SyncTransport {
    let pushes = Locked(0)

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        pushes.withLock { $0 += 1 }
        return PushResponse(results: [], lastSeq: 0)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        Data()
    }

    func health() async -> Bool { true }

    func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        throw .http(status: 413, body: ErrorBody(ErrorDetail(code: .quotaExceeded, message: "the user's file quota is used")), retryAfter: nil)
    }

    /// A transport with none of the file routes.
    struct Bare: SyncTransport {
        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { PushResponse(results: [], lastSeq: 0) }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
            Data()
        }

        func health() async -> Bool { true }
    }
}

import ContractRuntime
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// Files in the store: imported (copied and hashed in chunks), recorded in the same transaction
/// as the row that names them, refused with a typed error and nothing left, cleaned at open,
/// and cached within a budget that never evicts what is still needed.
@Suite("Files: the store")
struct FileStoreTests {
    @Test("an import copies and hashes the file in chunks; the write that names it records it, waiting to upload, and a restart keeps it")
    func importAndRecord() throws {
        let device = try FileTestStore()
        let store = device.store
        // Over two of the import's 1 MiB chunks.
        let bytes = typed(sampleBytes(2_500_000), as: "application/pdf")
        let source = device.directory.url.appendingPathComponent("scan.pdf")
        try bytes.write(to: source)

        let document = try store.importFile(at: source, contentType: "application/pdf; charset=binary", name: "scan.pdf")
        #expect(document.sha256 == sha256Hex(bytes))
        #expect(document.byteCount == 2_500_000)
        #expect(document.contentType == "application/pdf")
        #expect(document.name == "scan.pdf")
        let stored = store.filesDirectory.appendingPathComponent(String(document.sha256.prefix(2))).appendingPathComponent(document.sha256)
        #expect(try Data(contentsOf: stored) == bytes)
        // Imported, not yet the store's: no record until a write names it.
        #expect(try store.storedFiles().isEmpty)

        try store.create(Receipt(id: "r-1", title: "Taxi", document: document))
        let record = try #require(try store.storedFile(sha256: document.sha256))
        #expect(record.state == .waitingToUpload)
        #expect(record.reference == document)
        #expect(record.acknowledgedOffset == 0)
        #expect(try store.fetch(Receipt.self, id: "r-1")?.document == document)
        #expect(try store.localFile(for: document) == stored)

        // The same bytes again: the same file, one copy.
        let again = try store.importFile(bytes, contentType: "application/pdf")
        #expect(again.sha256 == document.sha256)
        try store.create(Receipt(id: "r-2", title: "Taxi, again", document: again))
        #expect(device.filesOnDisk() == ["\(document.sha256.prefix(2))/\(document.sha256)"])

        let reopened = try device.reopen()
        #expect(try reopened.store.storedFile(sha256: document.sha256)?.state == .waitingToUpload)
        #expect(reopened.filesOnDisk() == ["\(document.sha256.prefix(2))/\(document.sha256)"])
    }

    @Test("a file over the field's max_bytes, or of a type it does not accept, is refused at the write with a typed error and nothing of it stays")
    func refusals() throws {
        let device = try FileTestStore()
        let store = device.store

        let large = try store.importFile(sampleBytes(Receipt.photoLimit + 1), contentType: "image/x-test", name: "big.jpg")
        #expect(throws: OfflineStoreError.file(.tooLarge(contract: "Receipt", field: "photo", byteCount: 1_001, limit: 1_000))) {
            try store.create(Receipt(id: "r-1", title: "Lunch", photo: large))
        }
        let pdf = try store.importFile(typed(sampleBytes(10), as: "application/pdf"), contentType: "application/pdf")
        #expect(
            throws: OfflineStoreError.file(
                .contentTypeNotAllowed(contract: "Receipt", field: "photo", contentType: "application/pdf", allowed: ["image/*"]))
        ) {
            try store.create(Receipt(id: "r-1", title: "Lunch", photo: pdf))
        }
        // A patch is refused the same way.
        try store.create(Receipt(id: "r-2", title: "Dinner"))
        let other = try store.importFile(sampleBytes(2_000, seed: 3), contentType: "image/x-test")
        #expect(throws: OfflineStoreError.file(.tooLarge(contract: "Receipt", field: "photo", byteCount: 2_000, limit: 1_000))) {
            try store.patch(Receipt.self, id: "r-2", [.photo(other)])
        }

        #expect(try store.fetch(Receipt.self, id: "r-1") == nil)
        #expect(try store.outboxEntries().count == 1)  // r-2's create alone
        #expect(try store.storedFiles().isEmpty)
        #expect(device.filesOnDisk() == [])
        // The copy is gone: the store does not have it.
        #expect(try store.localFile(for: large) == nil)

        // Checked while importing when the field is named: never copied whole.
        let field = FileField(contract: "Receipt", field: "photo")
        #expect(throws: OfflineStoreError.file(.tooLarge(contract: "Receipt", field: "photo", byteCount: 5_000, limit: 1_000))) {
            try store.importFile(sampleBytes(5_000), contentType: "image/x-test", for: field)
        }
        #expect(
            throws: OfflineStoreError.file(
                .contentTypeNotAllowed(contract: "Receipt", field: "photo", contentType: "text/plain", allowed: ["image/*"]))
        ) {
            try store.importFile(sampleBytes(5), contentType: "text/plain", for: field)
        }
        #expect(throws: OfflineStoreError.unknownField(contract: "Receipt", field: "title")) {
            try store.importFile(sampleBytes(5), contentType: "text/plain", for: FileField(contract: "Receipt", field: "title"))
        }
        // Bytes that do not begin as their type's do (the server would refuse them too).
        #expect(throws: OfflineStoreError.file(.contentMismatch(contentType: "image/jpeg"))) {
            try store.importFile(Data("<html>not a photo</html>".utf8), contentType: "image/jpeg")
        }
        #expect(throws: OfflineStoreError.self) { try store.importFile(sampleBytes(5), contentType: "not a type") }
        #expect(throws: OfflineStoreError.self) { try store.importFile(sampleBytes(5), contentType: "image/x-test", name: "../etc/passwd") }
        #expect(device.filesOnDisk() == [])
    }

    @Test("the storage guard: an import needs twice its size free; without it the import is refused and nothing is copied")
    func storageGuard() throws {
        let space = FixedFreeSpace(1_000)
        let device = try FileTestStore(freeSpace: space)
        #expect(throws: OfflineStoreError.file(.insufficientSpace(neededBytes: 1_600, availableBytes: 1_000))) {
            try device.store.importFile(sampleBytes(800), contentType: "image/x-test")
        }
        #expect(device.filesOnDisk() == [])
        space.value = 1_600
        let photo = try device.store.importFile(sampleBytes(800), contentType: "image/x-test")
        #expect(photo.byteCount == 800)
    }

    @Test("a transaction that names an imported file and then fails leaves neither the row nor the file; one that commits keeps both")
    func transactionRollback() throws {
        let device = try FileTestStore()
        let store = device.store
        let photo = try store.importFile(sampleBytes(800), contentType: "image/x-test")
        struct Cancelled: Error {}
        #expect(throws: OfflineStoreError.self) {
            try store.transaction { transaction throws(OfflineStoreError) in
                try transaction.create(Receipt(id: "r-1", title: "Coffee", photo: photo))
                throw .invalidResolution(reason: "the app changed its mind")
            }
        }
        #expect(try store.fetch(Receipt.self, id: "r-1") == nil)
        #expect(try store.storedFiles().isEmpty)
        #expect(device.filesOnDisk() == [])

        let kept = try store.importFile(sampleBytes(800), contentType: "image/x-test")
        try store.transaction { transaction throws(OfflineStoreError) in
            try transaction.create(Receipt(id: "r-1", title: "Coffee", photo: kept))
            try transaction.create(Receipt(id: "r-2", title: "Coffee again", photo: kept))
        }
        #expect(try store.storedFile(sha256: kept.sha256)?.state == .waitingToUpload)
        #expect(device.filesOnDisk().count == 1)
    }

    @Test(
        "copies no write named, unfinished imports and week-old partial downloads are deleted when the store opens; discarding an import deletes it at once"
    )
    func orphanCleanup() throws {
        let device = try FileTestStore()
        let named = try device.store.importFile(sampleBytes(100, seed: 1), contentType: "image/x-test")
        try device.store.create(Receipt(id: "r-1", title: "Kept", photo: named))
        _ = try device.store.importFile(sampleBytes(100, seed: 2), contentType: "image/x-test")
        let discarded = try device.store.importFile(sampleBytes(100, seed: 3), contentType: "image/x-test")
        device.store.discardImportedFile(discarded)
        #expect(device.filesOnDisk().count == 2)
        // What a killed import left.
        let staging = device.store.filesDirectory.appendingPathComponent("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        try Data("half".utf8).write(to: staging.appendingPathComponent("x.part"))
        // Partial downloads: one of yesterday is kept to be resumed, one untouched for 8 days goes.
        let partials = device.store.filesDirectory.appendingPathComponent("partial")
        try FileManager.default.createDirectory(at: partials, withIntermediateDirectories: true)
        for (name, age) in [("recent", 1.0), ("stale", 8.0)] {
            let url = partials.appendingPathComponent(name)
            try Data("some bytes".utf8).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: TestStore.start.addingTimeInterval(-age * 86_400)], ofItemAtPath: url.path)
        }

        let reopened = try device.reopen()
        #expect(reopened.filesOnDisk() == ["\(named.sha256.prefix(2))/\(named.sha256)", "partial/recent"])
        #expect(try reopened.store.localFile(for: named) != nil)
    }

    @Test("the cache evicts the least recently used first, never a file waiting to upload or named by a row with an unsynced write")
    func evictionOrder() throws {
        let clock = ManualClock(TestStore.start)
        let device = try FileTestStore(clock: clock, limits: StorageLimits(fileCacheBytes: 2_500))
        let store = device.store
        // Three downloaded files of 1 000 bytes, a minute apart.
        var cached: [FileReference] = []
        for seed in 1...3 {
            let bytes = sampleBytes(1_000, seed: seed)
            let reference = try FileReference(sha256: sha256Hex(bytes), byteCount: 1_000, contentType: "image/x-test")
            try store.writePartialFile(sha256: reference.sha256, data: bytes, at: 0)
            _ = try store.adoptDownloadedFile(reference).get()
            cached.append(reference)
            clock.advance(by: 60)
        }
        // The third pushed the total to 3 000: the least recently used went.
        #expect(try store.storedFiles().map(\.reference.sha256).sorted() == [cached[1].sha256, cached[2].sha256].sorted())
        // Reading the older one makes it the most recent.
        #expect(try store.localFile(for: cached[1]) != nil)
        clock.advance(by: 60)

        // A photo taken on the device, written: waiting to upload, never evicted.
        let photo = try store.importFile(sampleBytes(900, seed: 9), contentType: "image/x-test")
        try store.create(Receipt(id: "r-1", title: "Fuel", photo: photo))
        #expect(try store.enforceFileCacheBudget() == [cached[2].sha256])
        #expect(try store.storedFile(sha256: photo.sha256)?.state == .waitingToUpload)

        // Uploaded, but its write is not on the server yet: kept, however far over budget.
        try store.recordUploaded(sha256: photo.sha256)
        try store.close()
        // Opening runs housekeeping, which keeps the budget.
        let tight = try FileTestStore(directory: device.directory, clock: clock, limits: StorageLimits(fileCacheBytes: 0))
        #expect(try tight.store.storedFiles().map(\.reference.sha256) == [photo.sha256])
        #expect(try tight.store.enforceFileCacheBudget() == [])
        #expect(tight.filesOnDisk() == ["\(photo.sha256.prefix(2))/\(photo.sha256)"])
    }

    @Test("partial downloads count in the cache budget and are deleted by last use like cached files, except one downloading now")
    func partialDownloadsInTheBudget() throws {
        let clock = ManualClock(TestStore.start)
        let device = try FileTestStore(clock: clock, limits: StorageLimits(fileCacheBytes: 2_500))
        let store = device.store
        func download(seed: Int) throws -> FileReference {
            let bytes = sampleBytes(1_000, seed: seed)
            let reference = try FileReference(sha256: sha256Hex(bytes), byteCount: 1_000, contentType: "image/x-test")
            try store.writePartialFile(sha256: reference.sha256, data: bytes, at: 0)
            _ = try store.adoptDownloadedFile(reference).get()
            clock.advance(by: 60)
            return reference
        }
        let first = try download(seed: 1)
        // 800 bytes of a download cut short, last written a minute after the first file.
        let cut = sha256Hex(sampleBytes(2_000, seed: 9))
        try store.writePartialFile(sha256: cut, data: sampleBytes(800, seed: 9), at: 0)
        try FileManager.default.setAttributes([.modificationDate: clock.now()], ofItemAtPath: store.partialFileURL(sha256: cut).path)
        clock.advance(by: 60)

        // 1 000 + 800 + 1 000 is over 2 500: the least recently used, the first file, goes.
        let second = try download(seed: 2)
        #expect(try store.storedFiles().map(\.reference.sha256) == [second.sha256])
        #expect(store.partialFileSize(sha256: cut) == 800)

        // Over again while the cut download resumes: it is left alone, the older cached file goes.
        store.fileStaging.beginDownload(cut)
        let third = try download(seed: 3)
        #expect(try store.storedFiles().map(\.reference.sha256) == [third.sha256])
        #expect(store.partialFileSize(sha256: cut) == 800)
        store.fileStaging.endDownload(cut)

        // Abandoned, it is now the least recently used: deleted like a cached file.
        _ = try download(seed: 4)
        #expect(store.partialFileSize(sha256: cut) == 0)
        #expect(try store.storedFiles().count == 2)
        #expect(first != second)
    }

    @Test("a file larger than the whole cache budget is still there when its download returns; the next budget check evicts it first")
    func fileLargerThanTheBudget() throws {
        let clock = ManualClock(TestStore.start)
        let device = try FileTestStore(clock: clock, limits: StorageLimits(fileCacheBytes: 1_000))
        let store = device.store
        let small = sampleBytes(600, seed: 1)
        let smallReference = try FileReference(sha256: sha256Hex(small), byteCount: 600, contentType: "image/x-test")
        try store.writePartialFile(sha256: smallReference.sha256, data: small, at: 0)
        _ = try store.adoptDownloadedFile(smallReference).get()
        clock.advance(by: 60)

        let large = sampleBytes(3_000, seed: 2)
        let reference = try FileReference(sha256: sha256Hex(large), byteCount: 3_000, contentType: "image/x-test")
        try store.writePartialFile(sha256: reference.sha256, data: large, at: 0)
        let url = try store.adoptDownloadedFile(reference).get()
        // The others made room; the one just downloaded is there to be read.
        #expect(try Data(contentsOf: url) == large)
        #expect(try store.storedFiles().map(\.reference.sha256) == [reference.sha256])
        clock.advance(by: 60)
        #expect(try store.enforceFileCacheBudget() == [reference.sha256])
    }
}

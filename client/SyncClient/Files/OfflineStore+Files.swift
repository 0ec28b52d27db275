public import ContractRuntime
import Crypto
public import Foundation
import GRDB
package import SyncProtocol

#if canImport(Glibc)
    import Glibc
    private let systemClose = Glibc.close
    private let systemRead = Glibc.read
    private let systemWrite = Glibc.write
#elseif canImport(Darwin)
    import Darwin
    private let systemClose = Darwin.close
    private let systemRead = Darwin.read
    private let systemWrite = Darwin.write
#endif

/// The files `file` fields name, kept content-addressed in the store's files folder
/// (``OfflineStoreConfiguration/filesDirectory``, `ab/<sha256>`) and recorded in the `files` table.
///
/// A file enters the store in two steps that together are one: ``importFile(at:contentType:name:for:)``
/// copies it into the folder, hashing it as it copies, and returns its ``FileReference``; the
/// first write transaction that stores a row naming that reference records the file in the same
/// SQLite transaction (waiting to upload). If that transaction fails or is refused, the copy is
/// deleted; a copy no write named is deleted when the store next opens. So a file is in the
/// store exactly when a committed row named it (or it was downloaded).
extension OfflineStore {
    /// The statements of `client.v10.files`.
    static let fileStatements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.files.rawValue)" (
            "sha256" TEXT PRIMARY KEY NOT NULL,
            "size" INTEGER NOT NULL,
            "content_type" TEXT NOT NULL,
            "name" TEXT,
            "state" TEXT NOT NULL CHECK ("state" IN ('waiting', 'uploaded', 'cached')),
            "upload_id" TEXT,
            "acknowledged_offset" INTEGER NOT NULL DEFAULT 0,
            "last_error" TEXT,
            "created_at" INTEGER NOT NULL,
            "last_used_at" INTEGER NOT NULL
        )
        """,
        #"CREATE INDEX "files_state_used_idx" ON "files" ("state", "last_used_at")"#,
    ]

    /// The store's folder of files (``OfflineStoreConfiguration/filesDirectory``).
    public var filesDirectory: URL { configuration.filesDirectory }

    /// Where the file of `sha256` lives: `<files>/ab/<sha256>`.
    func fileURL(sha256: String) -> URL {
        filesDirectory.appendingPathComponent(String(sha256.prefix(2)), isDirectory: true).appendingPathComponent(sha256)
    }

    /// Where the bytes of a download of `sha256` gather until they are checked.
    package func partialFileURL(sha256: String) -> URL {
        filesDirectory.appendingPathComponent("partial", isDirectory: true).appendingPathComponent(sha256)
    }

    /// The files' Data Protection class, that of the database (``OfflineStoreConfiguration/fileProtection``):
    /// a photo is as protected at rest as the row naming it. Set on every folder and file the
    /// store creates (a move keeps it); nothing elsewhere.
    var fileProtectionAttributes: [FileAttributeKey: Any] {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            [.protectionKey: configuration.fileProtection.fileProtectionType]
        #else
            [:]
        #endif
    }

    private var stagingDirectory: URL { filesDirectory.appendingPathComponent("staging", isDirectory: true) }

    // MARK: Import

    /// Copies the file at `url` into the store, hashing it as it copies (in chunks: memory stays
    /// flat whatever the file's size), and returns the reference to put in a row's `file` field.
    ///
    /// The copy belongs to the store once a write transaction stores a row naming the reference
    /// (``create(_:)``, ``update(_:)``, ``patch(_:id:_:)``, or the same inside
    /// ``transaction(_:)``): the file is then recorded, waiting to upload, in that transaction,
    /// and the sync engine uploads it before it pushes the write. When that transaction fails or
    /// is refused (``FileError/tooLarge(contract:field:byteCount:limit:)``,
    /// ``FileError/contentTypeNotAllowed(contract:field:contentType:allowed:)``), the copy is
    /// deleted; a copy no write names is deleted at the next open.
    ///
    /// ```swift
    /// let photo = try store.importFile(at: pickedURL, contentType: "image/jpeg", name: "slip.jpg",
    ///                                  for: FileField(contract: "Receipt", field: "photo"))
    /// try store.create(Receipt(id: store.newIdentifier(), photo: photo))
    /// ```
    ///
    /// - Parameters:
    ///   - url: the file to copy (a `file://` URL); it is left as it is.
    ///   - contentType: the file's media type (`image/jpeg`; parameters are dropped).
    ///   - name: its display name (`slip.jpg`), never a path.
    ///   - field: the field it is for, when known: its size limit and content types are checked
    ///     before and while copying, so a file too large is refused without being copied whole.
    /// - Throws: ``OfflineStoreError/file(_:)``: ``FileError/invalidReference(_:)``,
    ///   ``FileError/unreadable(path:reason:)``, ``FileError/tooLarge(contract:field:byteCount:limit:)``,
    ///   ``FileError/contentTypeNotAllowed(contract:field:contentType:allowed:)``,
    ///   ``FileError/insufficientSpace(neededBytes:availableBytes:)``; nothing is left behind.
    public func importFile(at url: URL, contentType: String, name: String? = nil, for field: FileField? = nil) throws(OfflineStoreError)
        -> FileReference
    {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw .file(.unreadable(path: url.path, reason: error.localizedDescription))
        }
        defer { try? handle.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
        return try importFile(contentType: contentType, name: name, field: field, expectedSize: size) { () throws(OfflineStoreError) in
            do {
                return try handle.read(upToCount: Self.fileChunkBytes) ?? Data()
            } catch {
                throw .file(.unreadable(path: url.path, reason: error.localizedDescription))
            }
        }
    }

    /// Copies `data` into the store as a file: ``importFile(at:contentType:name:for:)`` for bytes
    /// the app holds (a photo just taken).
    ///
    /// - Parameters:
    ///   - data: the file's bytes.
    ///   - contentType: the file's media type (`image/jpeg`; parameters are dropped).
    ///   - name: its display name, never a path.
    ///   - field: the field it is for, whose size limit and content types are checked first.
    /// - Throws: ``OfflineStoreError/file(_:)``, as ``importFile(at:contentType:name:for:)``.
    public func importFile(_ data: Data, contentType: String, name: String? = nil, for field: FileField? = nil) throws(OfflineStoreError)
        -> FileReference
    {
        var offset = 0
        return try importFile(contentType: contentType, name: name, field: field, expectedSize: Int64(data.count)) { () throws(OfflineStoreError) in
            let end = min(data.count, offset + Self.fileChunkBytes)
            defer { offset = end }
            return data.subdata(in: (data.startIndex + offset)..<(data.startIndex + end))
        }
    }

    /// Deletes the copy of a file imported in this run that no write named (the user cancelled
    /// the form); a file a committed row names stays.
    public func discardImportedFile(_ reference: FileReference) {
        fileStaging.touch(reference.sha256)
        settleImportedFiles()
    }

    /// How many bytes an import reads and hashes at a time.
    static let fileChunkBytes = 1 << 20

    private func importFile(
        contentType: String, name: String?, field: FileField?, expectedSize: Int64?, next: () throws(OfflineStoreError) -> Data
    ) throws(OfflineStoreError) -> FileReference {
        try ensureOpen()
        guard let type = FileReference.normalizedContentType(contentType) else {
            throw .file(.invalidReference(FileReferenceError.invalidContentType(contentType).description))
        }
        if let name, !FileReference.isSafeName(name) { throw .file(.invalidReference(FileReferenceError.invalidName(name).description)) }
        let limits = try fileFieldLimits(field)
        if let limits, !FileReference.contentType(type, isIn: limits.descriptor.contentTypes) {
            throw .file(
                .contentTypeNotAllowed(
                    contract: limits.contract, field: limits.descriptor.name, contentType: type, allowed: limits.descriptor.contentTypes))
        }
        if let limits, let expectedSize, let limit = limits.maxBytes, expectedSize > limit {
            throw .file(.tooLarge(contract: limits.contract, field: limits.descriptor.name, byteCount: expectedSize, limit: limit))
        }
        if let expectedSize { try ensureFileSpace(for: expectedSize) }

        let staging = stagingDirectory.appendingPathComponent(newIdentifier() + ".part")
        do {
            try FileManager.default.createDirectory(at: stagingDirectory, withIntermediateDirectories: true, attributes: fileProtectionAttributes)
            guard FileManager.default.createFile(atPath: staging.path, contents: nil, attributes: fileProtectionAttributes) else {
                throw OfflineStoreError.fileSystem(path: staging.path, reason: "cannot create the file")
            }
        } catch {
            throw Self.fileSystemError(error, path: staging.path)
        }
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: staging) } }
        var hasher = SHA256()
        var size: Int64 = 0
        do {
            let output = try FileHandle(forWritingTo: staging)
            defer { try? output.close() }
            var first = true
            while true {
                let chunk = try next()
                if first {
                    first = false
                    // A type with a known signature must begin with it, as the server checks.
                    guard FileSignature.matches(Array(chunk.prefix(FileSignature.headBytes)), contentType: type) else {
                        throw OfflineStoreError.file(.contentMismatch(contentType: type))
                    }
                }
                if chunk.isEmpty { break }
                size += Int64(chunk.count)
                if let limits, let limit = limits.maxBytes, size > limit {
                    throw OfflineStoreError.file(.tooLarge(contract: limits.contract, field: limits.descriptor.name, byteCount: size, limit: limit))
                }
                hasher.update(data: chunk)
                try output.write(contentsOf: chunk)
            }
            try output.synchronize()
        } catch {
            throw Self.fileSystemError(error, path: staging.path)
        }
        let sha256 = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        let reference: FileReference
        do {
            reference = try FileReference(sha256: sha256, byteCount: size, contentType: type, name: name)
        } catch {
            throw .file(.invalidReference(error.description))
        }
        // Into place, under its hash. The same bytes already there (another row's, a cached
        // download) are the same file: the copy goes.
        let destination = fileURL(sha256: sha256)
        do {
            try FileManager.default.createDirectory(
                at: destination.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: fileProtectionAttributes)
            if !FileManager.default.fileExists(atPath: destination.path) {
                try FileManager.default.moveItem(at: staging, to: destination)
                keep = true
            }
        } catch {
            throw Self.fileSystemError(error, path: destination.path)
        }
        fileStaging.stage(sha256)
        return reference
    }

    /// The contract, size limit and content types of `field`, or `nil`.
    private func fileFieldLimits(_ field: FileField?) throws(OfflineStoreError) -> (contract: String, descriptor: FieldDescriptor, maxBytes: Int64?)?
    {
        guard let field else { return nil }
        let fields = contracts.entity(named: field.contract)?.fields ?? contracts.event(named: field.contract)?.fields
        guard let fields else { throw .unknownContract(field.contract) }
        guard let descriptor = fields.first(where: { $0.name == field.field }), Self.isFileKind(descriptor.kind) else {
            throw .unknownField(contract: field.contract, field: field.field)
        }
        return (field.contract, descriptor, descriptor.maxBytes.map(Int64.init))
    }

    static func isFileKind(_ kind: FieldKind) -> Bool {
        switch kind {
        case .file, .list(.file): true
        default: false
        }
    }

    /// Refuses a file the volume has no room for: ``StorageLimits/downloadSpaceFactor`` times its
    /// size must be free, after evicting cached files if that makes room.
    func ensureFileSpace(for size: Int64) throws(OfflineStoreError) {
        guard size > 0 else { return }
        let needed = Int64((Double(size) * configuration.storageLimits.downloadSpaceFactor).rounded(.up))
        guard let free = freeBytes(), free < needed else { return }
        _ = try evictFiles(budget: nil, toFree: needed - free)
        let after = freeBytes() ?? free
        if after < needed { throw .file(.insufficientSpace(neededBytes: needed, availableBytes: after)) }
    }

    private static func fileSystemError(_ error: any Error, path: String) -> OfflineStoreError {
        if let error = error as? OfflineStoreError { return error }
        return .fileSystem(path: path, reason: error.localizedDescription)
    }

    // MARK: The write's step

    /// The file references among a row's wire values for its `file` fields (and lists of files).
    static func fileReferences(in wire: [String: JSONValue], fields: [FieldDescriptor]) -> [FileReference] {
        var references: [FileReference] = []
        for field in fields where isFileKind(field.kind) {
            switch wire[field.name] {
            case .array(let items)?: references += items.compactMap { try? FileReference(json: $0) }
            case let value?: if let reference = try? FileReference(json: value) { references.append(reference) }
            case nil: break
            }
        }
        return references
    }

    /// Called by a write before its values are checked: the imported files it names are settled
    /// after its transaction, kept if it committed, deleted if not.
    func noteFilesNamed(in wire: [String: JSONValue], fields: [FieldDescriptor]) {
        guard fileStaging.hasStaged else { return }
        for reference in Self.fileReferences(in: wire, fields: fields) where fileStaging.isStaged(reference.sha256) {
            fileStaging.touch(reference.sha256)
        }
    }

    /// Inside a write's transaction, once its values passed their contract: records each file
    /// the row names that was imported in this run (waiting to upload), and notes the use of
    /// those the store already holds.
    func recordNamedFiles(_ db: Database, in wire: [String: JSONValue], fields: [FieldDescriptor], now: Int64) throws {
        for reference in Self.fileReferences(in: wire, fields: fields) {
            if fileStaging.isStaged(reference.sha256) {
                guard FileManager.default.fileExists(atPath: fileURL(sha256: reference.sha256).path) else {
                    throw OfflineStoreError.file(.notImported(sha256: reference.sha256))
                }
                try db.execute(
                    sql: """
                        INSERT INTO "files" ("sha256", "size", "content_type", "name", "state", "created_at", "last_used_at")
                        VALUES (?, ?, ?, ?, 'waiting', ?, ?)
                        ON CONFLICT ("sha256") DO UPDATE SET "last_used_at" = excluded."last_used_at"
                        """,
                    arguments: [reference.sha256, reference.byteCount, reference.contentType, reference.name, now, now]
                )
            } else {
                try db.execute(sql: #"UPDATE "files" SET "last_used_at" = ? WHERE "sha256" = ?"#, arguments: [now, reference.sha256])
            }
        }
    }

    /// After a write transaction, committed or not: the imported files it named are the store's
    /// when a committed row recorded them, else deleted. Runs on the writer, so no transaction
    /// naming them is under way meanwhile.
    func settleImportedFiles() {
        let touched = fileStaging.takeTouched()
        guard !touched.isEmpty else { return }
        let staging = fileStaging
        let urls = Dictionary(touched.map { ($0, fileURL(sha256: $0)) }, uniquingKeysWith: { a, _ in a })
        do {
            try pool.writeWithoutTransaction { db in
                let held = try Self.heldFiles(db, touched)
                staging.unstage(touched)
                for sha in touched where !held.contains(sha) && !staging.isStaged(sha) {
                    if let url = urls[sha] { try? FileManager.default.removeItem(at: url) }
                }
            }
        } catch {
            // Left for the next open's clean-up.
            staging.unstage(touched)
        }
    }

    private static func heldFiles(_ db: Database, _ hashes: [String]) throws -> Set<String> {
        guard !hashes.isEmpty else { return [] }
        return try Set(
            String.fetchAll(
                db,
                sql: #"SELECT "sha256" FROM "files" WHERE "sha256" IN ("# + Array(repeating: "?", count: hashes.count).joined(separator: ", ") + ")",
                arguments: StatementArguments(hashes)
            ))
    }

    /// At open: deletes what a killed or failed run left in the files folder, every file no
    /// `files` row records (copies whose write never committed) and unfinished imports. Partial
    /// downloads stay, to be resumed, unless untouched for ``partialDownloadLifetime``.
    func removeOrphanFiles() throws(OfflineStoreError) {
        let manager = FileManager.default
        // What an older build's asset downloader left: the files folder holds such files now.
        try? manager.removeItem(at: configuration.legacyAssetsDirectory)
        guard manager.fileExists(atPath: filesDirectory.path) else { return }
        try? manager.removeItem(at: stagingDirectory)
        let held = try read { db in try Set(String.fetchAll(db, sql: #"SELECT "sha256" FROM "files""#)) }
        let partials = filesDirectory.appendingPathComponent("partial", isDirectory: true)
        let oldest = now().date.addingTimeInterval(-Self.partialDownloadLifetime)
        for name in (try? manager.contentsOfDirectory(atPath: partials.path)) ?? [] {
            let url = partials.appendingPathComponent(name)
            let modified = (try? manager.attributesOfItem(atPath: url.path)[.modificationDate]) as? Date
            if modified.map({ $0 < oldest }) ?? true { try? manager.removeItem(at: url) }
        }
        let folders = (try? manager.contentsOfDirectory(atPath: filesDirectory.path)) ?? []
        for folder in folders where folder.count == 2 {
            let directory = filesDirectory.appendingPathComponent(folder, isDirectory: true)
            for name in (try? manager.contentsOfDirectory(atPath: directory.path)) ?? [] where !held.contains(name) {
                try? manager.removeItem(at: directory.appendingPathComponent(name))
            }
        }
    }

    /// Runs `body` in one write transaction that changes the `files` table alone: without the
    /// outbox seal's check and sealing (``write(_:)``), which the outbox needs and a file's
    /// bookkeeping (a read's use, an upload's offset) does not.
    func writeFiles<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try ensureOpen()
        do {
            return try pool.write(body)
        } catch {
            throw Self.map(error)
        }
    }

    /// How long a partial download nobody resumed is kept: 7 days.
    static let partialDownloadLifetime: TimeInterval = 7 * 86_400

    // MARK: Reading

    /// The file of `reference` on this device, or `nil` when the store does not hold it (ask
    /// ``SyncEngine/file(for:)``, which downloads it). Counts as a use for the cache's order.
    public func localFile(for reference: FileReference) throws(OfflineStoreError) -> URL? {
        let url = fileURL(sha256: reference.sha256)
        let now = now().millisecondsSince1970
        let held = try writeFiles { db in
            try db.execute(sql: #"UPDATE "files" SET "last_used_at" = ? WHERE "sha256" = ?"#, arguments: [now, reference.sha256])
            return db.changesCount > 0
        }
        guard FileManager.default.fileExists(atPath: url.path) else {
            if held { try writeFiles { db in try db.execute(sql: #"DELETE FROM "files" WHERE "sha256" = ?"#, arguments: [reference.sha256]) } }
            return nil
        }
        return held || fileStaging.isStaged(reference.sha256) ? url : nil
    }

    /// Every file the store holds, least recently used first.
    public func storedFiles() throws(OfflineStoreError) -> [StoredFile] {
        try read { db in try Row.fetchAll(db, sql: #"SELECT * FROM "files" ORDER BY "last_used_at", "sha256""#) }.compactMap(storedFile)
    }

    /// The store's record of the file of `sha256`, or `nil`.
    public func storedFile(sha256: String) throws(OfflineStoreError) -> StoredFile? {
        try read { db in try Row.fetchOne(db, sql: #"SELECT * FROM "files" WHERE "sha256" = ?"#, arguments: [sha256]) }.flatMap(storedFile)
    }

    private func storedFile(_ row: Row) -> StoredFile? {
        let sha: String = row["sha256"]
        guard let reference = try? FileReference(sha256: sha, byteCount: row["size"], contentType: row["content_type"], name: row["name"]),
            let state = StoredFileState(rawValue: row["state"])
        else { return nil }
        return StoredFile(
            reference: reference, state: state, uploadID: row["upload_id"], acknowledgedOffset: row["acknowledged_offset"],
            lastError: (row["last_error"] as String?).map(ErrorDetail.init(storedText:)),
            lastUsedAt: Timestamp(millisecondsSince1970: row["last_used_at"]).date, url: fileURL(sha256: sha))
    }

    // MARK: The cache

    /// Evicts files until those the store holds take no more than
    /// ``StorageLimits/fileCacheBytes``, the least recently used first. Partial downloads count
    /// too (their last use is their last byte received) and are deleted like cached files,
    /// except those downloading now. Never evicted: files waiting to upload, and files named by
    /// rows (or events) with a write not yet on the server. Returns the SHA-256 of each file
    /// evicted (or partial download deleted).
    @discardableResult
    public func enforceFileCacheBudget() throws(OfflineStoreError) -> [String] {
        try evictFiles(budget: configuration.storageLimits.fileCacheBytes, toFree: 0)
    }

    /// Evicts the least recently used evictable files (never `spared`) until the files take at
    /// most `budget` bytes and `toFree` bytes were freed.
    func evictFiles(budget: Int64?, toFree: Int64, sparing spared: String? = nil) throws(OfflineStoreError) -> [String] {
        let partials = partialDownloads()
        let partialBytes = partials.reduce(0) { $0 + $1.size }
        let evicted: [(sha: String, size: Int64, partial: Bool)] = try writeFiles { db in
            let total = (try Int64.fetchOne(db, sql: #"SELECT COALESCE(SUM("size"), 0) FROM "files""#) ?? 0) + partialBytes
            var excess = max(budget.map { total - $0 } ?? 0, toFree)
            guard excess > 0 else { return [] }
            let kept = try filesNamedByUnsyncedRows(db)
            var candidates: [(sha: String, size: Int64, usedAt: Int64, partial: Bool)] = try Row.fetchAll(
                db, sql: #"SELECT "sha256", "size", "last_used_at" FROM "files" WHERE "state" != 'waiting'"#
            ).compactMap { row in
                let sha: String = row["sha256"]
                return kept.contains(sha) || sha == spared ? nil : (sha, row["size"], row["last_used_at"], false)
            }
            candidates += partials.filter { !fileStaging.isDownloading($0.sha) }.map { ($0.sha, $0.size, $0.modifiedAt, true) }
            candidates.sort { ($0.usedAt, $0.sha) < ($1.usedAt, $1.sha) }
            var evicted: [(String, Int64, Bool)] = []
            for candidate in candidates where excess > 0 {
                if !candidate.partial {
                    try db.execute(sql: #"DELETE FROM "files" WHERE "sha256" = ?"#, arguments: [candidate.sha])
                }
                evicted.append((candidate.sha, candidate.size, candidate.partial))
                excess -= candidate.size
            }
            return evicted
        }
        for file in evicted {
            try? FileManager.default.removeItem(at: file.partial ? partialFileURL(sha256: file.sha) : fileURL(sha256: file.sha))
        }
        return evicted.map(\.sha)
    }

    /// The partial downloads in the files folder: their size and when they last received bytes
    /// (milliseconds since 1970).
    private func partialDownloads() -> [(sha: String, size: Int64, modifiedAt: Int64)] {
        let manager = FileManager.default
        let folder = filesDirectory.appendingPathComponent("partial", isDirectory: true)
        return ((try? manager.contentsOfDirectory(atPath: folder.path)) ?? []).compactMap { name in
            guard let attributes = try? manager.attributesOfItem(atPath: folder.appendingPathComponent(name).path) else { return nil }
            let size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
            let modified = (attributes[.modificationDate] as? Date) ?? .distantPast
            return (name, size, Int64((modified.timeIntervalSince1970 * 1_000).rounded(.down)))
        }
    }

    /// The files named by the current rows (and events) that writes not yet on the server are about.
    func filesNamedByUnsyncedRows(_ db: Database) throws -> Set<String> {
        var named: Set<String> = []
        let rows = try Row.fetchAll(
            db,
            sql: #"SELECT DISTINCT "entity", "row_id" FROM "outbox" WHERE "status" IN \#(OutboxStatus.sql(OutboxStatus.unsynced))"#)
        for reference in rows {
            let contract: String = reference["entity"]
            let id: String = reference["row_id"]
            let table: String
            let key: String
            let fields: [FieldDescriptor]
            if let entity = contracts.entity(named: contract) {
                (table, key, fields) = (entity.table, entity.primaryKey, entity.fields)
            } else if let event = contracts.event(named: contract) {
                (table, key, fields) = (event.table, "event_id", event.fields)
            } else {
                continue
            }
            guard fields.contains(where: { Self.isFileKind($0.kind) }) else { continue }
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier) WHERE \(key.quotedDatabaseIdentifier) = ?", arguments: [id])
            else { continue }
            let fileFields = fields.filter { Self.isFileKind($0.kind) }
            let wire = try codec.wireObject(row, fields: fileFields, table: table, id: id)
            for file in Self.fileReferences(in: wire, fields: fileFields) { named.insert(file.sha256) }
        }
        return named
    }

    // MARK: Uploads (the engine's)

    /// The files waiting to upload, oldest first.
    package func filesWaitingToUpload() throws(OfflineStoreError) -> [StoredFile] {
        try read { db in try Row.fetchAll(db, sql: #"SELECT * FROM "files" WHERE "state" = 'waiting' ORDER BY "created_at", "sha256""#) }
            .compactMap(storedFile)
    }

    /// Of the files `mutations` name, those still waiting to upload.
    package func filesWaitingToUpload(namedBy mutations: [Mutation]) throws(OfflineStoreError) -> [StoredFile] {
        var hashes: Set<String> = []
        for mutation in mutations {
            let fields = contracts.entity(named: mutation.entity)?.fields ?? contracts.event(named: mutation.entity)?.fields ?? []
            guard fields.contains(where: { Self.isFileKind($0.kind) }), case .object(let payload)? = mutation.payload else { continue }
            for reference in Self.fileReferences(in: payload, fields: fields) { hashes.insert(reference.sha256) }
        }
        guard !hashes.isEmpty else { return [] }
        return try filesWaitingToUpload().filter { hashes.contains($0.reference.sha256) }
    }

    /// After a push answered `file_missing`: the files `mutations` name that the store holds
    /// wait to upload again (a `POST` answers `stored` when the server has them after all).
    package func declareFilesAgain(namedBy mutations: [Mutation]) throws(OfflineStoreError) {
        var hashes: Set<String> = []
        for mutation in mutations {
            let fields = contracts.entity(named: mutation.entity)?.fields ?? contracts.event(named: mutation.entity)?.fields ?? []
            guard case .object(let payload)? = mutation.payload else { continue }
            for reference in Self.fileReferences(in: payload, fields: fields) { hashes.insert(reference.sha256) }
        }
        guard !hashes.isEmpty else { return }
        let held = hashes.filter { FileManager.default.fileExists(atPath: fileURL(sha256: $0).path) }
        try writeFiles { db in
            for sha in held {
                try db.execute(
                    sql: """
                        UPDATE "files" SET "state" = 'waiting', "upload_id" = NULL, "acknowledged_offset" = 0
                        WHERE "sha256" = ? AND "state" != 'waiting'
                        """,
                    arguments: [sha])
            }
        }
    }

    /// Before a batch is sent, when the server refused files it names (`refusals`, by SHA-256):
    /// the batch's writes naming one fail with the refusal (``OutboxStatus/failed``, kept with
    /// their row for the app to retry or discard), and since the batch never left the device,
    /// its other writes give back their wire `seq` to be numbered again without a gap.
    package func failWrites(of request: PushRequest, namingRefusedFiles refusals: [String: ErrorDetail]) throws(OfflineStoreError) {
        guard let first = request.mutations.map(\.seq).min() else { return }
        let now = now().millisecondsSince1970
        try write { db in
            for mutation in request.mutations {
                let fields = contracts.entity(named: mutation.entity)?.fields ?? contracts.event(named: mutation.entity)?.fields ?? []
                guard case .object(let payload)? = mutation.payload,
                    let refusal = Self.fileReferences(in: payload, fields: fields).lazy.compactMap({ refusals[$0.sha256] }).first
                else { continue }
                try db.execute(
                    sql: """
                        UPDATE "outbox" SET "status" = \(OutboxStatus.failed.sql), "push_seq" = NULL, "last_error" = ?, "updated_at" = ?
                        WHERE "client_mutation_id" = ? AND "status" IN \(OutboxStatus.sql(OutboxStatus.unsent))
                        """,
                    arguments: [refusal.storedText, now, mutation.clientMutationId]
                )
            }
            try Self.releasePushSequence(db, above: first - 1)
        }
    }

    /// Files waiting to upload that no write still held by the outbox names (its write was
    /// discarded, or resolved by taking the server's row): they are not uploaded, and become
    /// cached copies the budget may evict. Returns the server uploads they had under way, for
    /// the engine to abandon (``SyncTransport/abandonFileUpload(uploadID:)``).
    package func releaseUnneededFiles() throws(OfflineStoreError) -> [String] {
        try write { db in
            let waiting = try Row.fetchAll(db, sql: #"SELECT "sha256", "upload_id" FROM "files" WHERE "state" = 'waiting'"#)
            guard !waiting.isEmpty else { return [] }
            let withFiles =
                contracts.entities.filter { $0.fields.contains { Self.isFileKind($0.kind) } }.map(\.name)
                + contracts.events.filter { $0.fields.contains { Self.isFileKind($0.kind) } }.map(\.name)
            var named: Set<String> = []
            if !withFiles.isEmpty {
                let marks = Array(repeating: "?", count: withFiles.count).joined(separator: ", ")
                let rows = try Row.fetchAll(
                    db,
                    sql: #"SELECT * FROM "outbox" WHERE "status" IN \#(OutboxStatus.sql(OutboxStatus.unsynced)) AND "entity" IN (\#(marks))"#,
                    arguments: StatementArguments(withFiles))
                for row in rows {
                    // An entry that cannot be opened (quarantined, tampered) may name any file: keep them all.
                    guard let record = OutboxRecord(row: row), record.status != .quarantined,
                        let content = try openVerified(db, record), case .object(let payload)? = content.payload
                    else { return [] }
                    let fields = contracts.entity(named: record.entity)?.fields ?? contracts.event(named: record.entity)?.fields ?? []
                    for reference in Self.fileReferences(in: payload, fields: fields) { named.insert(reference.sha256) }
                }
            }
            var uploads: [String] = []
            for row in waiting {
                let sha: String = row["sha256"]
                guard !named.contains(sha), !fileStaging.isStaged(sha) else { continue }
                if let upload: String = row["upload_id"] { uploads.append(upload) }
                try db.execute(
                    sql: """
                        UPDATE "files" SET "state" = 'cached', "upload_id" = NULL, "acknowledged_offset" = 0, "last_error" = NULL
                        WHERE "sha256" = ?
                        """,
                    arguments: [sha])
            }
            return uploads
        }
    }

    /// When a failed write is queued again: the files it names that the server refused are
    /// offered to it once more (the quota may have room now, the app may have fixed the file).
    func clearFileRefusals(_ db: Database, entity: String, payload: JSONValue?) throws {
        let fields = contracts.entity(named: entity)?.fields ?? contracts.event(named: entity)?.fields ?? []
        guard case .object(let wire)? = payload else { return }
        for reference in Self.fileReferences(in: wire, fields: fields) {
            try db.execute(
                sql: #"UPDATE "files" SET "last_error" = NULL WHERE "sha256" = ? AND "state" = 'waiting'"#, arguments: [reference.sha256])
        }
    }

    /// Records where an upload stands: its id and the bytes the server acknowledged.
    package func recordUploadProgress(sha256: String, uploadID: String?, offset: Int64) throws(OfflineStoreError) {
        try writeFiles { db in
            try db.execute(
                sql: #"UPDATE "files" SET "upload_id" = ?, "acknowledged_offset" = ? WHERE "sha256" = ? AND "state" = 'waiting'"#,
                arguments: [uploadID, offset, sha256])
        }
    }

    /// The server holds the file: nothing more to send.
    package func recordUploaded(sha256: String) throws(OfflineStoreError) {
        try writeFiles { db in
            try db.execute(
                sql: """
                    UPDATE "files" SET "state" = 'uploaded', "upload_id" = NULL, "acknowledged_offset" = "size", "last_error" = NULL
                    WHERE "sha256" = ? AND "state" = 'waiting'
                    """,
                arguments: [sha256])
        }
    }

    /// The server refused the file (quota, hash): kept waiting, with the reason for the app, and
    /// not sent again until a write naming it is retried.
    package func recordUploadFailure(sha256: String, error: ErrorDetail) throws(OfflineStoreError) {
        try writeFiles { db in
            try db.execute(sql: #"UPDATE "files" SET "last_error" = ? WHERE "sha256" = ?"#, arguments: [error.storedText, sha256])
        }
    }

    /// Up to `count` bytes of the stored file of `sha256` from `offset`.
    package func readFileBytes(sha256: String, offset: Int64, count: Int) throws(OfflineStoreError) -> Data {
        let url = fileURL(sha256: sha256)
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(offset))
            return try handle.read(upToCount: count) ?? Data()
        } catch {
            throw .fileSystem(path: url.path, reason: error.localizedDescription)
        }
    }

    // MARK: Downloads (the engine's)

    /// Bytes of a partial download of `sha256` already on the device.
    package func partialFileSize(sha256: String) -> Int64 {
        let path = partialFileURL(sha256: sha256).path
        return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// Appends `data` to the partial download of `sha256` at `offset` (truncating what was after it).
    package func writePartialFile(sha256: String, data: Data, at offset: Int64) throws(OfflineStoreError) {
        let url = partialFileURL(sha256: sha256)
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: fileProtectionAttributes)
            if !FileManager.default.fileExists(atPath: url.path) {
                _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: fileProtectionAttributes)
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            try handle.truncate(atOffset: UInt64(offset))
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: data)
        } catch {
            throw .fileSystem(path: url.path, reason: error.localizedDescription)
        }
    }

    /// The SHA-256 of the first `count` bytes of the partial download of `sha256` so far (read
    /// in chunks), to go on with the bytes still to come, and how many bytes it covers.
    func partialFileHasher(sha256: String, upTo count: Int64) throws(OfflineStoreError) -> (SHA256, Int64) {
        var hasher = SHA256()
        guard count > 0 else { return (hasher, 0) }
        let hashed = try hashPartialFile(sha256: sha256, from: 0, count: count, into: &hasher)
        return (hasher, hashed)
    }

    /// Feeds bytes `start..<start + count` of the partial download of `sha256` to `hasher`;
    /// returns how many there were (fewer when the file ends first).
    func hashPartialFile(sha256: String, from start: Int64, count: Int64, into hasher: inout SHA256) throws(OfflineStoreError) -> Int64 {
        let file = try ReadOnlyFile(partialFileURL(sha256: sha256))
        return try file.hash(from: start, count: count, into: &hasher)
    }
    /// Where a range of a download of `sha256` from byte `start` is received before it joins
    /// the partial download (the staging folder, emptied at open).
    package func receivedRangeURL(sha256: String, start: Int64) throws(OfflineStoreError) -> URL {
        do {
            try FileManager.default.createDirectory(at: stagingDirectory, withIntermediateDirectories: true, attributes: fileProtectionAttributes)
        } catch {
            throw .fileSystem(path: stagingDirectory.path, reason: error.localizedDescription)
        }
        return stagingDirectory.appendingPathComponent("download-\(sha256)-\(start)")
    }

    /// Makes the received range at `received` bytes `start...` of the partial download of
    /// `sha256` (dropping what was after `start`), and deletes it. A range from the start
    /// becomes the partial file by a rename, without a copy; a later one is appended by the
    /// kernel (`sendfile`) where it can, else through one reused buffer.
    package func placeReceivedRange(_ received: URL, sha256: String, at start: Int64) throws(OfflineStoreError) {
        let partial = partialFileURL(sha256: sha256)
        defer { try? FileManager.default.removeItem(at: received) }
        do {
            try FileManager.default.createDirectory(
                at: partial.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: fileProtectionAttributes)
            if start == 0 {
                if FileManager.default.fileExists(atPath: partial.path) { try FileManager.default.removeItem(at: partial) }
                try FileManager.default.moveItem(at: received, to: partial)
                if !fileProtectionAttributes.isEmpty { try FileManager.default.setAttributes(fileProtectionAttributes, ofItemAtPath: partial.path) }
                return
            }
            if !FileManager.default.fileExists(atPath: partial.path) {
                _ = FileManager.default.createFile(atPath: partial.path, contents: nil, attributes: fileProtectionAttributes)
            }
        } catch {
            throw .fileSystem(path: partial.path, reason: error.localizedDescription)
        }
        let input = open(received.path, O_RDONLY)
        guard input >= 0 else { throw .fileSystem(path: received.path, reason: String(cString: strerror(errno))) }
        defer { _ = systemClose(input) }
        let output = open(partial.path, O_WRONLY)
        guard output >= 0 else { throw .fileSystem(path: partial.path, reason: String(cString: strerror(errno))) }
        defer { _ = systemClose(output) }
        guard ftruncate(output, off_t(start)) == 0, lseek(output, off_t(start), SEEK_SET) == off_t(start) else {
            throw .fileSystem(path: partial.path, reason: String(cString: strerror(errno)))
        }
        if let failure = Self.appendFile(from: input, to: output) { throw .fileSystem(path: partial.path, reason: failure) }
    }

    /// Copies what is left of `input` to `output` at its position: `nil`, or why it failed.
    private static func appendFile(from input: Int32, to output: Int32) -> String? {
        #if os(Linux)
            // In the kernel, page cache to page cache: no copy through the process.
            while true {
                let sent = sendfile(output, input, nil, 1 << 30)
                if sent < 0, errno == EINTR { continue }
                if sent < 0 { break }  // Not for these files here: the loop below.
                if sent == 0 { return nil }
            }
        #endif
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: fileChunkBytes, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let read = systemRead(input, buffer.baseAddress, buffer.count)
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else { return String(cString: strerror(errno)) }
            if read == 0 { return nil }
            var written = 0
            while written < read {
                let count = systemWrite(output, buffer.baseAddress! + written, read - written)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return String(cString: strerror(errno)) }
                written += count
            }
        }
    }

    /// Checks a finished download against `reference` (its size, and its SHA-256: read in chunks,
    /// unless the download hashed the bytes as it wrote them, `verifiedSHA256`), moves it into
    /// place and records it as cached; then keeps the cache within its budget. Returns the
    /// mismatch, with what the bytes hashed to, and deletes them when they do not match.
    package func adoptDownloadedFile(
        _ reference: FileReference, verifiedSHA256: String? = nil
    ) throws(OfflineStoreError) -> Result<URL, FileDownloadError> {
        let partial = partialFileURL(sha256: reference.sha256)
        let received: String
        let size: Int64
        if let verifiedSHA256 {
            received = verifiedSHA256
            size = partialFileSize(sha256: reference.sha256)
        } else {
            var hasher = SHA256()
            var counted: Int64 = 0
            do {
                let handle = try FileHandle(forReadingFrom: partial)
                defer { try? handle.close() }
                while let chunk = try handle.read(upToCount: Self.fileChunkBytes), !chunk.isEmpty {
                    hasher.update(data: chunk)
                    counted += Int64(chunk.count)
                }
            } catch {
                throw .fileSystem(path: partial.path, reason: error.localizedDescription)
            }
            received = hasher.finalize().map { String(format: "%02x", $0) }.joined()
            size = counted
        }
        guard received == reference.sha256, size == reference.byteCount else {
            try? FileManager.default.removeItem(at: partial)
            return .failure(.hashMismatch(expected: reference.sha256, received: received))
        }
        let destination = fileURL(sha256: reference.sha256)
        do {
            try FileManager.default.createDirectory(
                at: destination.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: fileProtectionAttributes)
            if FileManager.default.fileExists(atPath: destination.path) {
                try FileManager.default.removeItem(at: partial)
            } else {
                try FileManager.default.moveItem(at: partial, to: destination)
            }
        } catch {
            throw .fileSystem(path: destination.path, reason: error.localizedDescription)
        }
        let now = now().millisecondsSince1970
        try writeFiles { db in
            try db.execute(
                sql: """
                    INSERT INTO "files" ("sha256", "size", "content_type", "name", "state", "created_at", "last_used_at")
                    VALUES (?, ?, ?, ?, 'cached', ?, ?)
                    ON CONFLICT ("sha256") DO UPDATE SET "last_used_at" = excluded."last_used_at"
                    """,
                arguments: [reference.sha256, reference.byteCount, reference.contentType, reference.name, now, now])
        }
        // The file just downloaded is about to be read: the others make room, even when it
        // alone is over the budget (it goes first the next time the budget is kept).
        _ = try evictFiles(budget: configuration.storageLimits.fileCacheBytes, toFree: 0, sparing: reference.sha256)
        return .success(destination)
    }
}

/// The files imported in this run that no committed write recorded yet, and those a write
/// transaction named (settled after it).
final class FileStaging: Sendable {
    private struct State {
        var staged: Set<String> = []
        var touched: Set<String> = []
        var downloading: Set<String> = []
    }

    private let state = Locked(State())

    var hasStaged: Bool { state.withLock { !$0.staged.isEmpty } }

    func stage(_ sha256: String) { state.withLock { _ = $0.staged.insert(sha256) } }

    func isStaged(_ sha256: String) -> Bool { state.withLock { $0.staged.contains(sha256) } }

    func touch(_ sha256: String) { state.withLock { _ = $0.touched.insert(sha256) } }

    func unstage(_ hashes: [String]) { state.withLock { $0.staged.subtract(hashes) } }

    /// A download of `sha256` writes its partial file from now until ``endDownload(_:)``: the
    /// cache budget leaves that partial file alone.
    func beginDownload(_ sha256: String) { state.withLock { _ = $0.downloading.insert(sha256) } }

    func endDownload(_ sha256: String) { state.withLock { _ = $0.downloading.remove(sha256) } }

    func isDownloading(_ sha256: String) -> Bool { state.withLock { $0.downloading.contains(sha256) } }

    func takeTouched() -> [String] {
        state.withLock { state in
            defer { state.touched = [] }
            return state.touched.sorted()
        }
    }
}

/// A file open for reading by its descriptor, closed when the last reference goes: it stays
/// readable after it is renamed or deleted, so a received range is hashed while it is placed.
final class ReadOnlyFile: Sendable {
    let path: String
    private let descriptor: Int32

    init(_ url: URL) throws(OfflineStoreError) {
        path = url.path
        descriptor = open(url.path, O_RDONLY)
        guard descriptor >= 0 else { throw .fileSystem(path: url.path, reason: String(cString: strerror(errno))) }
    }

    deinit { _ = systemClose(descriptor) }

    /// Feeds bytes `start..<start + count` to `hasher` through one buffer reused for every read;
    /// returns how many there were (fewer when the file ends first).
    func hash(from start: Int64, count: Int64, into hasher: inout SHA256) throws(OfflineStoreError) -> Int64 {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: OfflineStore.fileChunkBytes, alignment: 16)
        defer { buffer.deallocate() }
        var hashed: Int64 = 0
        while hashed < count {
            let read = pread(descriptor, buffer.baseAddress, Int(min(Int64(buffer.count), count - hashed)), off_t(start + hashed))
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else { throw .fileSystem(path: path, reason: String(cString: strerror(errno))) }
            if read == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<read]))
            hashed += Int64(read)
        }
        return hashed
    }
}
